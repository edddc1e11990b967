//! Bandwidth traces: parse recorded link capacity or throughput from text and
//! turn it into a rate series (seed 000 §VI-A evaluates its predictors on
//! such series; the simulator drives link capacity from them).
//!
//! Sans-IO: everything parses from a `&str`; reading the file is the
//! caller's job (braid-sim's `trace_file` is the one loader). Video
//! frame-size traces are [`frames`].
//!
//! # Main types
//!
//! * [`Trace`]: a parsed trace, either a list of delivery opportunities
//!   (mahimahi) or a step function of rates (everything else).
//! * [`TraceFormat`]: which text format it came from; [`Trace::parse`] can
//!   detect it (see there for how).
//! * [`TraceError`]: what was wrong, with the 1-based line number where there
//!   is one (``line 17: expected `<seconds> <Mbit/s>`, got `abc` ``).
//!
//! # Formats and semantics (see `../shared/data/SOURCES.md`)
//!
//! * **mahimahi**: one integer per line, a millisecond timestamp at which one
//!   1500-byte packet may leave the bottleneck; repeats are several packets in
//!   that millisecond. A bin's rate is `count · 12000 bit / interval`.
//! * **series**: `<seconds> <Mbit/s>` per line (tab or spaces), irregularly
//!   spaced. Each sample's rate holds until the next sample starts; the last
//!   sample holds for the median gap between samples. The normalised `.tsv`
//!   copies (one `#` comment line, then 100 ms bins) are series too.
//! * **5G CSV**: a G-NetTrack Pro log with a header row; the `DL_bitrate`
//!   column in kbit/s, about one row per second. The wall-clock stamps have
//!   1 s resolution with duplicates and jitter, so, as for the `.tsv` copies,
//!   the rows are spread evenly from the first stamp to the last and then read
//!   as a series.
//!
//! # Invariants
//!
//! * Times are offsets from the first sample, which is time zero; they never
//!   decrease (the parser rejects a trace whose time goes backwards, except
//!   the 5G stamps, of which only the first and last are used).
//! * Rates are finite and non-negative; a trace has at least one sample
//!   (two for a series, which needs a gap) and covers a positive duration of
//!   at most [`MAX_TRACE_DURATION`]; it has at most [`MAX_TRACE_LINES`] lines.
//! * [`Trace::rate_series`] emits only complete bins, `floor(duration /
//!   interval)` of them (at most [`MAX_RATE_BINS`]); bin `k` covers
//!   `[k·interval, (k+1)·interval)` after the first sample. This reproduces
//!   the `.tsv` copies, except that for mahimahi files those also carry the
//!   final partial bin (counted as if it were complete).

#[cfg(test)]
mod data_tests;
pub mod frames;
mod parse;

use crate::time::Duration;
use crate::units::Bandwidth;

/// The most lines (data, comment or blank) a trace text may have. The largest
/// real trace here has about half a million; this leaves room for forty times
/// that while bounding memory at a few hundred MB.
pub const MAX_TRACE_LINES: usize = 20_000_000;

/// The longest span a trace may cover (30 days). Longer spans are taken as a
/// unit mistake (for example microseconds read as milliseconds).
pub const MAX_TRACE_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The highest rate a sample may state: 10 Tbit/s. Anything above is taken
/// as a unit mistake rather than a measurement.
pub const MAX_RATE: Bandwidth = Bandwidth::from_bps(10_000_000_000_000);

/// The most bins [`Trace::rate_series`] produces (80 MB of output).
pub const MAX_RATE_BINS: usize = 10_000_000;

/// Bits one mahimahi delivery opportunity carries: a 1500-byte packet.
pub const MAHIMAHI_BITS_PER_OPPORTUNITY: u64 = 1500 * 8;

/// The text format of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum TraceFormat {
    /// mahimahi packet-delivery opportunities: one millisecond timestamp per
    /// line, one 1500-byte packet each.
    #[serde(rename = "mahimahi")]
    Mahimahi,
    /// `<seconds><TAB or spaces><Mbit/s>` samples, each held until the next;
    /// `#` comment lines and blank lines are ignored (the `.tsv` copies).
    #[serde(rename = "series")]
    Series,
    /// The 5G G-NetTrack Pro CSV: header row, `Timestamp` and `DL_bitrate`
    /// (kbit/s) columns.
    #[serde(rename = "5g-csv")]
    G5Csv,
}

impl TraceFormat {
    /// A short lower-case name (`mahimahi`, `series`, `5g-csv`).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mahimahi => "mahimahi",
            TraceFormat::Series => "series",
            TraceFormat::G5Csv => "5g-csv",
        }
    }
}

impl core::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// What was wrong with a trace. Errors tied to a place in the text carry its
/// 1-based line number and display as `line N: …`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// No data lines at all (only blanks, comments or a header).
    #[error("empty trace: no data lines")]
    Empty,
    /// A line did not have the expected shape or a field was not a number.
    #[error("line {line}: expected {expected}, got `{got}`")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What the line should have looked like.
        expected: &'static str,
        /// The offending text (shortened).
        got: String,
    },
    /// A rate was below zero.
    #[error("line {line}: negative rate `{got}`")]
    NegativeRate {
        /// 1-based line number.
        line: usize,
        /// The offending text.
        got: String,
    },
    /// A rate was above [`MAX_RATE`].
    #[error("line {line}: rate `{got}` is above the limit of {limit} (wrong unit?)")]
    RateTooHigh {
        /// 1-based line number.
        line: usize,
        /// The offending text.
        got: String,
        /// [`MAX_RATE`].
        limit: Bandwidth,
    },
    /// A timestamp was earlier than the one before it.
    #[error("line {line}: time goes backwards: `{got}` comes after `{previous}`")]
    TimeWentBackwards {
        /// 1-based line number.
        line: usize,
        /// The offending timestamp.
        got: String,
        /// The timestamp on the previous data line.
        previous: String,
    },
    /// A timestamp lies more than [`MAX_TRACE_DURATION`] after the first.
    #[error("line {line}: time `{got}` is more than {limit} after the first sample (wrong unit?)")]
    TooLong {
        /// 1-based line number.
        line: usize,
        /// The offending timestamp.
        got: String,
        /// [`MAX_TRACE_DURATION`].
        limit: Duration,
    },
    /// The text has more than [`MAX_TRACE_LINES`] lines.
    #[error("line {line}: trace has more than {limit} lines")]
    TooManyLines {
        /// The first line beyond the limit.
        line: usize,
        /// [`MAX_TRACE_LINES`].
        limit: usize,
    },
    /// A series needs two samples to know how long the last one lasts.
    #[error("a {format} trace needs at least 2 samples, found {found}")]
    TooFewSamples {
        /// The format being parsed.
        format: TraceFormat,
        /// How many data lines there were.
        found: usize,
    },
    /// All samples share one timestamp, so the trace covers no time.
    #[error("trace covers no time: all {samples} samples have the same timestamp")]
    ZeroDuration {
        /// How many samples there were.
        samples: usize,
    },
    /// A CSV header lacks a column the format needs.
    #[error("line {line}: CSV header has no `{column}` column")]
    MissingColumn {
        /// 1-based line number of the header.
        line: usize,
        /// The missing column name.
        column: &'static str,
    },
    /// Format detection did not recognise the first data line.
    #[error("line {line}: cannot tell the trace format from `{got}`: expected a mahimahi millisecond timestamp, `<seconds> <Mbit/s>`, or a G-NetTrack CSV header")]
    UnknownFormat {
        /// 1-based line number of the first data line.
        line: usize,
        /// Its text (shortened).
        got: String,
    },
    /// [`Trace::checked_rate_series`] was asked for zero-length bins.
    #[error("bin interval must be positive")]
    ZeroInterval,
    /// [`Trace::checked_rate_series`] would produce more than [`MAX_RATE_BINS`] bins.
    #[error("{bins} bins of {interval} would exceed the limit of {limit}; use a longer interval")]
    TooManyBins {
        /// Bins the trace would need.
        bins: u64,
        /// The requested interval.
        interval: Duration,
        /// [`MAX_RATE_BINS`].
        limit: usize,
    },
}

impl TraceError {
    /// The 1-based line number the error refers to, if it refers to one.
    pub fn line(&self) -> Option<usize> {
        match self {
            TraceError::Malformed { line, .. }
            | TraceError::NegativeRate { line, .. }
            | TraceError::RateTooHigh { line, .. }
            | TraceError::TimeWentBackwards { line, .. }
            | TraceError::TooLong { line, .. }
            | TraceError::TooManyLines { line, .. }
            | TraceError::MissingColumn { line, .. }
            | TraceError::UnknownFormat { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// One piece of a series trace's step function: `rate` from `start` until `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Offset of the sample from the first sample.
    pub start: Duration,
    /// When the next sample starts (for the last one: `start` + the median gap).
    pub end: Duration,
    /// The rate held over `[start, end)`.
    pub rate: Bandwidth,
}

/// The parsed content.
#[derive(Debug, Clone, PartialEq)]
enum Data {
    /// mahimahi: offsets of delivery opportunities from the first, non-decreasing.
    Opportunities(Vec<Duration>),
    /// A step function: `starts` non-decreasing from zero, one rate (bit/s,
    /// finite, non-negative) per start, the last step ends at `end`.
    Steps {
        starts: Vec<Duration>,
        rates_bps: Vec<f64>,
        end: Duration,
    },
}

/// A parsed bandwidth trace.
///
/// Build one with [`Trace::parse`]; read it as a rate series with
/// [`Trace::rate_series`], or raw with [`Trace::opportunities`] (mahimahi)
/// and [`Trace::steps`] (series and 5G CSV).
///
/// ```
/// use braid_core::trace::{Trace, TraceFormat};
/// use braid_core::{Bandwidth, Duration};
///
/// let trace = Trace::parse("0.0\t2.0\n1.0\t4.0\n", None).unwrap();
/// assert_eq!(trace.format(), TraceFormat::Series);
/// assert_eq!(trace.duration(), Duration::from_secs(2)); // last held for the median gap
/// let bins = trace.rate_series(Duration::from_millis(500));
/// assert_eq!(bins, vec![Bandwidth::from_mbps(2), Bandwidth::from_mbps(2),
///                       Bandwidth::from_mbps(4), Bandwidth::from_mbps(4)]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    format: TraceFormat,
    data: Data,
}

impl Trace {
    /// Parses a trace from its text.
    ///
    /// With `format: None` the format is detected from the first line that
    /// is neither blank nor a `#` comment: a line containing a comma is a
    /// G-NetTrack CSV header ([`TraceFormat::G5Csv`]); a single
    /// whitespace-separated field is a mahimahi timestamp
    /// ([`TraceFormat::Mahimahi`]); two fields are `<seconds> <Mbit/s>`
    /// ([`TraceFormat::Series`]). Anything else is
    /// [`TraceError::UnknownFormat`]. The chosen parser then checks every
    /// line as strictly as with an explicit format.
    ///
    /// # Errors
    ///
    /// [`TraceError`] for an empty trace, a malformed or non-numeric line, a
    /// negative or absurdly high rate, time going backwards, a span longer
    /// than [`MAX_TRACE_DURATION`], more than [`MAX_TRACE_LINES`] lines, a
    /// series with fewer than two samples or covering no time, or a CSV
    /// without `Timestamp` and `DL_bitrate` columns. Errors about a line
    /// carry its 1-based number.
    pub fn parse(text: &str, format: Option<TraceFormat>) -> Result<Trace, TraceError> {
        // A UTF-8 byte-order mark (spreadsheet exports) is not part of the header.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let format = match format {
            Some(f) => f,
            None => detect(text)?,
        };
        let data = match format {
            TraceFormat::Mahimahi => parse::mahimahi(text)?,
            TraceFormat::Series => parse::series(text)?,
            TraceFormat::G5Csv => parse::g5csv(text)?,
        };
        Ok(Trace { format, data })
    }

    /// The format the trace was parsed as.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// How many samples (mahimahi: delivery opportunities; otherwise rows).
    pub fn samples(&self) -> usize {
        match &self.data {
            Data::Opportunities(o) => o.len(),
            Data::Steps { starts, .. } => starts.len(),
        }
    }

    /// The time the trace covers from its first sample. mahimahi: up to the
    /// end of the last opportunity's millisecond; series: up to the end of
    /// the last sample, which is held for the median gap.
    pub fn duration(&self) -> Duration {
        match &self.data {
            Data::Opportunities(o) => {
                o.last().copied().unwrap_or(Duration::ZERO) + Duration::from_millis(1)
            }
            Data::Steps { end, .. } => *end,
        }
    }

    /// The delivery opportunities of a mahimahi trace, as offsets from the
    /// first (non-decreasing, one per 1500-byte packet); `None` for other
    /// formats.
    pub fn opportunities(&self) -> Option<&[Duration]> {
        match &self.data {
            Data::Opportunities(o) => Some(o),
            Data::Steps { .. } => None,
        }
    }

    /// The step function of a series or 5G trace (consecutive, covering
    /// `[0, duration)`); `None` for mahimahi.
    pub fn steps(&self) -> Option<impl Iterator<Item = Step> + '_> {
        match &self.data {
            Data::Opportunities(_) => None,
            Data::Steps {
                starts,
                rates_bps,
                end,
            } => Some(starts.iter().enumerate().map(move |(i, &start)| Step {
                start,
                end: starts.get(i + 1).copied().unwrap_or(*end),
                rate: Bandwidth::from_bps_f64(rates_bps[i]),
            })),
        }
    }

    /// The time-weighted mean rate per bin of `interval`, the first bin
    /// starting at the first sample. Only complete bins are emitted
    /// (`floor(duration / interval)`), at most [`MAX_RATE_BINS`] of them: a
    /// longer series is cut there. A zero interval gives an empty series.
    /// Use [`Trace::checked_rate_series`] to be told instead.
    ///
    /// mahimahi: `opportunities in the bin · 12000 bit / interval`.
    /// Series and 5G: the mean of the step function over the bin.
    pub fn rate_series(&self, interval: Duration) -> Vec<Bandwidth> {
        if interval.is_zero() {
            return Vec::new();
        }
        let bins = self.bin_count(interval).min(MAX_RATE_BINS as u64) as usize;
        self.bins(interval, bins)
    }

    /// Like [`Trace::rate_series`], but refuses instead of cutting.
    ///
    /// # Errors
    ///
    /// [`TraceError::ZeroInterval`] for a zero interval;
    /// [`TraceError::TooManyBins`] if more than [`MAX_RATE_BINS`] bins would
    /// be needed.
    pub fn checked_rate_series(&self, interval: Duration) -> Result<Vec<Bandwidth>, TraceError> {
        if interval.is_zero() {
            return Err(TraceError::ZeroInterval);
        }
        let bins = self.bin_count(interval);
        if bins > MAX_RATE_BINS as u64 {
            return Err(TraceError::TooManyBins {
                bins,
                interval,
                limit: MAX_RATE_BINS,
            });
        }
        Ok(self.bins(interval, bins as usize))
    }

    /// The number of complete bins of a non-zero `interval`.
    fn bin_count(&self, interval: Duration) -> u64 {
        self.duration()
            .checked_div_duration(interval)
            .unwrap_or_default()
    }

    /// The first `bins` bins of `interval` (`bins` complete bins exist).
    fn bins(&self, interval: Duration, bins: usize) -> Vec<Bandwidth> {
        let width = interval.as_nanos();
        let secs = interval.as_secs_f64();
        let mut out = Vec::with_capacity(bins);
        match &self.data {
            Data::Opportunities(offsets) => {
                let mut i = 0;
                for k in 0..bins as u64 {
                    let end = (k + 1).saturating_mul(width);
                    let mut count: u64 = 0;
                    while i < offsets.len() && offsets[i].as_nanos() < end {
                        count += 1;
                        i += 1;
                    }
                    let bits = count.saturating_mul(MAHIMAHI_BITS_PER_OPPORTUNITY);
                    out.push(Bandwidth::from_bps_f64(bits as f64 / secs));
                }
            }
            Data::Steps {
                starts,
                rates_bps,
                end,
            } => {
                let step_end = |i: usize| starts.get(i + 1).copied().unwrap_or(*end).as_nanos();
                // `first` is the first step that ends after the current bin starts.
                let mut first = 0;
                for k in 0..bins as u64 {
                    let lo = k.saturating_mul(width);
                    let hi = lo.saturating_add(width);
                    while first < starts.len() && step_end(first) <= lo {
                        first += 1;
                    }
                    let mut acc = 0.0_f64; // bit·ns
                    let mut i = first;
                    while i < starts.len() && starts[i].as_nanos() < hi {
                        let a = starts[i].as_nanos().max(lo);
                        let b = step_end(i).min(hi);
                        if b > a {
                            acc += rates_bps[i] * (b - a) as f64;
                        }
                        i += 1;
                    }
                    out.push(Bandwidth::from_bps_f64(acc / width as f64));
                }
            }
        }
        out
    }
}

/// Picks the format from the first data line (see [`Trace::parse`]).
fn detect(text: &str) -> Result<TraceFormat, TraceError> {
    for (idx, raw) in text.lines().enumerate() {
        if idx >= MAX_TRACE_LINES {
            return Err(TraceError::TooManyLines {
                line: idx + 1,
                limit: MAX_TRACE_LINES,
            });
        }
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.contains(',') {
            return Ok(TraceFormat::G5Csv);
        }
        return match line.split_whitespace().count() {
            1 => Ok(TraceFormat::Mahimahi),
            2 => Ok(TraceFormat::Series),
            _ => Err(TraceError::UnknownFormat {
                line: idx + 1,
                got: parse::shorten(line),
            }),
        };
    }
    Err(TraceError::Empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbps(v: f64) -> Bandwidth {
        Bandwidth::from_mbps_f64(v)
    }

    #[test]
    fn detects_formats() {
        assert_eq!(detect("0\n1\n").unwrap(), TraceFormat::Mahimahi);
        assert_eq!(
            detect("# time_s\tmbps\n0.0\t1.5\n").unwrap(),
            TraceFormat::Series
        );
        assert_eq!(
            detect("\n0.0 1.5\n").unwrap(),
            TraceFormat::Series,
            "blank lines skipped, spaces accepted"
        );
        assert_eq!(
            detect("Timestamp,DL_bitrate\n").unwrap(),
            TraceFormat::G5Csv
        );
        assert_eq!(detect(""), Err(TraceError::Empty));
        assert_eq!(detect("# only a comment\n\n"), Err(TraceError::Empty));
        let err = detect("\n1 2 3\n").unwrap_err();
        assert_eq!(err.line(), Some(2));
        assert!(err.to_string().starts_with("line 2: cannot tell"), "{err}");
    }

    #[test]
    fn mahimahi_bins_count_opportunities() {
        // 3 opportunities in [0,100) ms, 1 in [100,200), the last one at 250 ms
        // makes the trace 251 ms long: two complete 100 ms bins.
        let t = Trace::parse("0\n0\n99\n150\n250\n", None).unwrap();
        assert_eq!(t.format(), TraceFormat::Mahimahi);
        assert_eq!(t.samples(), 5);
        assert_eq!(t.duration(), Duration::from_millis(251));
        let bins = t.rate_series(Duration::from_millis(100));
        assert_eq!(bins, vec![mbps(0.36), mbps(0.12)]);
        // One bin of 251 ms would not be complete; 1 ms bins are.
        assert!(t.rate_series(Duration::from_millis(300)).is_empty());
        let fine = t.rate_series(Duration::from_millis(1));
        assert_eq!(fine.len(), 251);
        assert_eq!(fine[0], mbps(24.0), "2 packets in 1 ms");
        assert!(t.steps().is_none());
        assert_eq!(t.opportunities().unwrap().len(), 5);
    }

    #[test]
    fn mahimahi_offsets_are_from_first_sample() {
        let t = Trace::parse("1000\n1000\n1100\n", Some(TraceFormat::Mahimahi)).unwrap();
        assert_eq!(t.duration(), Duration::from_millis(101));
        assert_eq!(t.rate_series(Duration::from_millis(100)), vec![mbps(0.24)]);
    }

    #[test]
    fn series_holds_each_sample_until_the_next() {
        // Gaps 1 s and 3 s: median 2 s, so the last sample lasts 2 s.
        let t = Trace::parse("10.0\t1.0\n11.0\t3.0\n14.0\t5.0\n", None).unwrap();
        assert_eq!(t.duration(), Duration::from_secs(6));
        let bins = t.rate_series(Duration::from_secs(2));
        // [0,2): 1 s at 1 + 1 s at 3 = mean 2; [2,4): 3; [4,6): 5
        assert_eq!(bins, vec![mbps(2.0), mbps(3.0), mbps(5.0)]);
        let steps: Vec<_> = t.steps().unwrap().collect();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[2].start, Duration::from_secs(4));
        assert_eq!(steps[2].end, Duration::from_secs(6));
        assert_eq!(steps[1].rate, mbps(3.0));
    }

    #[test]
    fn series_time_weighted_bins_split_steps() {
        let t = Trace::parse("0 0\n0.25 4\n0.5 0\n", None).unwrap();
        // median gap 0.25 s: duration 0.75 s; 0.5 s bins -> one complete bin
        assert_eq!(t.rate_series(Duration::from_millis(500)), vec![mbps(2.0)]);
        assert_eq!(
            t.rate_series(Duration::from_millis(250)),
            vec![mbps(0.0), mbps(4.0), mbps(0.0)]
        );
    }

    #[test]
    fn checked_rate_series_refuses_bad_intervals() {
        let t = Trace::parse("0\n5\n", None).unwrap();
        assert_eq!(
            t.checked_rate_series(Duration::ZERO),
            Err(TraceError::ZeroInterval)
        );
        assert!(t.rate_series(Duration::ZERO).is_empty());
        let long = Trace::parse("0 1\n2000000 1\n", None).unwrap();
        let err = long
            .checked_rate_series(Duration::from_millis(1))
            .unwrap_err();
        assert!(matches!(err, TraceError::TooManyBins { .. }), "{err}");
        assert_eq!(
            long.rate_series(Duration::from_millis(1)).len(),
            MAX_RATE_BINS
        );
    }

    #[test]
    fn byte_order_mark_and_crlf_are_accepted() {
        let csv = "\u{feff}Timestamp,DL_bitrate\r\n2020.01.01_00.00.00,1000\r\n2020.01.01_00.00.01,3000\r\n";
        let t = Trace::parse(csv, None).unwrap();
        assert_eq!(t.format(), TraceFormat::G5Csv);
        assert_eq!(
            t.rate_series(Duration::from_secs(1)),
            vec![mbps(1.0), mbps(3.0)]
        );
        let series = Trace::parse("\u{feff}0 1\r\n1 2\r\n", None).unwrap();
        assert_eq!(series.format(), TraceFormat::Series);
    }

    #[test]
    fn error_messages_name_the_line() {
        let err = Trace::parse("0 1\n1 2\nabc\n", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 3: expected `<seconds> <Mbit/s>`, got `abc`"
        );
        let err = Trace::parse("0\n5\n3\n", None).unwrap_err();
        assert_eq!(err.line(), Some(3));
        assert!(err.to_string().contains("backwards"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(text in ".{0,400}") {
            for format in [None, Some(TraceFormat::Mahimahi), Some(TraceFormat::Series), Some(TraceFormat::G5Csv)] {
                if let Ok(t) = Trace::parse(&text, format) {
                    let _ = t.rate_series(Duration::from_millis(100));
                    proptest::prop_assert!(t.duration() > Duration::ZERO);
                }
            }
        }

        #[test]
        fn parse_never_panics_on_trace_like_text(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    "[0-9]{1,12}",
                    "-?[0-9]{0,6}(\\.[0-9]{0,4})?[ \t]+-?[0-9]{0,6}(\\.[0-9]{0,3})?(e[0-9]{1,3})?",
                    "20[0-9]{2}\\.[0-9]{2}\\.[0-9]{2}_[0-9]{2}\\.[0-9]{2}\\.[0-9]{2},-?[0-9]{1,6}",
                    "#.*",
                    "",
                ],
                0..40,
            ),
            interval_ns in 0u64..5_000_000_000,
        ) {
            let text = lines.join("\n");
            let csv = format!("Timestamp,DL_bitrate\n{text}");
            for text in [&text, &csv] {
                if let Ok(t) = Trace::parse(text, None) {
                    let bins = t.rate_series(Duration::from_nanos(interval_ns));
                    let expect = t.duration().checked_div_duration(Duration::from_nanos(interval_ns));
                    proptest::prop_assert_eq!(bins.len() as u64, expect.unwrap_or(0).min(MAX_RATE_BINS as u64));
                }
            }
        }

        #[test]
        fn series_bins_preserve_volume(
            samples in proptest::collection::vec((1u64..5_000, 0u32..100_000), 2..50),
        ) {
            // gaps in ms, rates in kbit/s; over whole-trace bins of 1 ms the
            // bits delivered must equal the step function's integral.
            let mut t = 0u64;
            let mut text = String::new();
            for (gap, kbps) in &samples {
                text.push_str(&format!("{}.{:03} {}\n", t / 1000, t % 1000, *kbps as f64 / 1000.0));
                t += gap;
            }
            let trace = Trace::parse(&text, Some(TraceFormat::Series)).unwrap();
            let bins = trace.rate_series(Duration::from_millis(1));
            // The last step may end mid-millisecond (median of two gaps); only
            // complete bins are emitted, so integrate up to the last one.
            let cover = Duration::from_millis(bins.len() as u64);
            let steps: f64 = trace
                .steps()
                .unwrap()
                .map(|s| s.rate.bps() as f64 * (s.end.min(cover) - s.start).as_secs_f64())
                .sum();
            let binned: f64 = bins.iter().map(|b| b.bps() as f64 * 1e-3).sum();
            proptest::prop_assert!((steps - binned).abs() <= 1e-6 * steps.max(1.0) + bins.len() as f64 * 1e-3);
        }
    }
}
