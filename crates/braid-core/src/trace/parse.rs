//! The three line parsers behind [`Trace::parse`](super::Trace::parse).
//!
//! Each walks the text once, checks every data line strictly, and builds the
//! internal [`Data`]. Line numbers are 1-based; blank lines and `#` comment
//! lines are skipped (and counted). No parser allocates more than one entry
//! per line, and the number of lines is bounded by [`MAX_TRACE_LINES`].

use super::{Data, TraceError, TraceFormat, MAX_RATE, MAX_TRACE_DURATION, MAX_TRACE_LINES};
use crate::time::Duration;

const MAHIMAHI_EXPECTED: &str = "one integer millisecond timestamp per line";
const SERIES_EXPECTED: &str = "`<seconds> <Mbit/s>`";
const CSV_ROW_EXPECTED: &str = "a CSV row with `Timestamp` and `DL_bitrate` fields";
const CSV_STAMP_EXPECTED: &str = "a `YYYY.MM.DD_HH.MM.SS` timestamp";
const CSV_RATE_EXPECTED: &str = "a `DL_bitrate` in kbit/s";

/// The longest excerpt of a bad line an error quotes.
const MAX_QUOTE_CHARS: usize = 60;

/// A line excerpt for an error message: control characters escaped, cut at
/// [`MAX_QUOTE_CHARS`].
pub(super) fn shorten(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX_QUOTE_CHARS {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

/// The data lines of `text` as `(1-based line number, trimmed line)`,
/// skipping blank and `#` lines; an error once [`MAX_TRACE_LINES`] is passed.
fn data_lines(text: &str) -> impl Iterator<Item = Result<(usize, &str), TraceError>> {
    text.lines()
        .enumerate()
        .map(|(idx, raw)| {
            if idx >= MAX_TRACE_LINES {
                Err(TraceError::TooManyLines {
                    line: idx + 1,
                    limit: MAX_TRACE_LINES,
                })
            } else {
                Ok((idx + 1, raw.trim()))
            }
        })
        .filter(|r| !matches!(r, Ok((_, l)) if l.is_empty() || l.starts_with('#')))
        // Stop after the first error so a huge text is not walked to its end.
        .scan(false, |failed, r| {
            if *failed {
                return None;
            }
            *failed = r.is_err();
            Some(r)
        })
}

fn malformed(line: usize, expected: &'static str, got: &str) -> TraceError {
    TraceError::Malformed {
        line,
        expected,
        got: shorten(got),
    }
}

/// Parses a finite float.
fn finite(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Checks a rate in bit/s read from `field` on `line`.
fn check_rate(line: usize, field: &str, bps: f64) -> Result<f64, TraceError> {
    if bps < 0.0 {
        return Err(TraceError::NegativeRate {
            line,
            got: shorten(field),
        });
    }
    if bps > MAX_RATE.bps() as f64 {
        return Err(TraceError::RateTooHigh {
            line,
            got: shorten(field),
            limit: MAX_RATE,
        });
    }
    Ok(bps)
}

/// mahimahi: one integer millisecond timestamp per line.
pub(super) fn mahimahi(text: &str) -> Result<Data, TraceError> {
    let max_ms = MAX_TRACE_DURATION.as_millis();
    let mut offsets = Vec::new();
    let mut first: Option<u64> = None;
    let mut previous: Option<(u64, &str)> = None;
    for item in data_lines(text) {
        let (line, l) = item?;
        let ms: u64 = l
            .parse()
            .map_err(|_| malformed(line, MAHIMAHI_EXPECTED, l))?;
        if let Some((prev, prev_text)) = previous {
            if ms < prev {
                return Err(TraceError::TimeWentBackwards {
                    line,
                    got: shorten(l),
                    previous: shorten(prev_text),
                });
            }
        }
        let origin = *first.get_or_insert(ms);
        let offset = ms - origin; // ms >= previous >= origin
        if offset > max_ms {
            return Err(TraceError::TooLong {
                line,
                got: shorten(l),
                limit: MAX_TRACE_DURATION,
            });
        }
        offsets.push(Duration::from_millis(offset));
        previous = Some((ms, l));
    }
    if offsets.is_empty() {
        return Err(TraceError::Empty);
    }
    Ok(Data::Opportunities(offsets))
}

/// `<seconds> <Mbit/s>` per line, tab or spaces between.
pub(super) fn series(text: &str) -> Result<Data, TraceError> {
    let max_secs = MAX_TRACE_DURATION.as_secs_f64();
    let mut starts = Vec::new();
    let mut rates = Vec::new();
    let mut first: Option<f64> = None;
    let mut previous: Option<(f64, &str)> = None;
    for item in data_lines(text) {
        let (line, l) = item?;
        let mut fields = l.split_whitespace();
        let (Some(t_text), Some(v_text), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(malformed(line, SERIES_EXPECTED, l));
        };
        let (Some(t), Some(v)) = (finite(t_text), finite(v_text)) else {
            return Err(malformed(line, SERIES_EXPECTED, l));
        };
        let bps = check_rate(line, v_text, v * 1e6)?;
        if let Some((prev, prev_text)) = previous {
            if t < prev {
                return Err(TraceError::TimeWentBackwards {
                    line,
                    got: shorten(t_text),
                    previous: shorten(prev_text),
                });
            }
        }
        let origin = *first.get_or_insert(t);
        let offset = t - origin;
        if offset > max_secs {
            // also catches an overflow to infinity (both times are finite)
            return Err(TraceError::TooLong {
                line,
                got: shorten(t_text),
                limit: MAX_TRACE_DURATION,
            });
        }
        starts.push(Duration::from_secs_f64(offset));
        rates.push(bps);
        previous = Some((t, t_text));
    }
    finish_steps(TraceFormat::Series, starts, rates)
}

/// The G-NetTrack Pro CSV: a header row naming `Timestamp` and `DL_bitrate`
/// (kbit/s), then one row per (about) second. The rows are spread evenly
/// from the first stamp to the last, as the `.tsv` copies were made: row `i`
/// of `n` starts at `i · span / (n − 1)`.
pub(super) fn g5csv(text: &str) -> Result<Data, TraceError> {
    let mut lines = data_lines(text);
    let (header_line, header) = match lines.next() {
        Some(item) => item?,
        None => return Err(TraceError::Empty),
    };
    let column = |name: &'static str| {
        header
            .split(',')
            .position(|h| h.trim() == name)
            .ok_or(TraceError::MissingColumn {
                line: header_line,
                column: name,
            })
    };
    let stamp_col = column("Timestamp")?;
    let rate_col = column("DL_bitrate")?;

    let mut rates = Vec::new();
    let mut first_stamp: Option<i64> = None;
    let mut last: Option<(usize, i64, &str)> = None;
    for item in lines {
        let (line, l) = item?;
        let fields: Vec<&str> = l.split(',').collect();
        let (Some(stamp_text), Some(rate_text)) = (fields.get(stamp_col), fields.get(rate_col))
        else {
            return Err(malformed(line, CSV_ROW_EXPECTED, l));
        };
        let (stamp_text, rate_text) = (stamp_text.trim(), rate_text.trim());
        let stamp = civil_seconds(stamp_text)
            .ok_or_else(|| malformed(line, CSV_STAMP_EXPECTED, stamp_text))?;
        let kbps =
            finite(rate_text).ok_or_else(|| malformed(line, CSV_RATE_EXPECTED, rate_text))?;
        rates.push(check_rate(line, rate_text, kbps * 1e3)?);
        first_stamp.get_or_insert(stamp);
        last = Some((line, stamp, stamp_text));
    }
    let (Some(first), Some((last_line, last_stamp, last_text))) = (first_stamp, last) else {
        return Err(TraceError::Empty);
    };
    if rates.len() < 2 {
        return Err(TraceError::TooFewSamples {
            format: TraceFormat::G5Csv,
            found: rates.len(),
        });
    }
    let span = last_stamp - first;
    if span < 0 {
        return Err(TraceError::TimeWentBackwards {
            line: last_line,
            got: shorten(last_text),
            previous: "the first row's stamp".to_string(),
        });
    }
    let span = Duration::from_secs(span.unsigned_abs());
    if span > MAX_TRACE_DURATION {
        return Err(TraceError::TooLong {
            line: last_line,
            got: shorten(last_text),
            limit: MAX_TRACE_DURATION,
        });
    }
    let gaps = (rates.len() - 1) as u128;
    let starts = (0..rates.len() as u128)
        .map(|i| {
            // i <= gaps, so the quotient is at most span and fits in u64.
            let ns = span.as_nanos() as u128 * i / gaps;
            Duration::from_nanos(ns as u64)
        })
        .collect();
    finish_steps(TraceFormat::G5Csv, starts, rates)
}

/// Closes a step function: the last sample is held for the median gap.
fn finish_steps(
    format: TraceFormat,
    starts: Vec<Duration>,
    rates_bps: Vec<f64>,
) -> Result<Data, TraceError> {
    match starts.len() {
        0 => return Err(TraceError::Empty),
        1 => return Err(TraceError::TooFewSamples { format, found: 1 }),
        _ => {}
    }
    let mut gaps: Vec<u64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_nanos())
        .collect();
    gaps.sort_unstable();
    let mid = gaps.len() / 2;
    let median = if gaps.len() % 2 == 1 {
        gaps[mid]
    } else {
        // the mean of the two middle gaps, without overflow
        gaps[mid - 1] / 2 + gaps[mid] / 2 + (gaps[mid - 1] % 2 + gaps[mid] % 2) / 2
    };
    let last = starts[starts.len() - 1];
    let end = last + Duration::from_nanos(median);
    if end.is_zero() {
        return Err(TraceError::ZeroDuration {
            samples: starts.len(),
        });
    }
    Ok(Data::Steps {
        starts,
        rates_bps,
        end,
    })
}

/// Seconds since 1970-01-01 for a `YYYY.MM.DD_HH.MM.SS` stamp (UTC-agnostic:
/// only differences are used), or `None` if it is not one.
fn civil_seconds(s: &str) -> Option<i64> {
    let (date, time) = s.split_once('_')?;
    let mut d = date.split('.');
    let mut t = time.split('.');
    let next = |it: &mut core::str::Split<'_, char>| -> Option<i64> {
        let f = it.next()?;
        if f.is_empty() || f.len() > 4 || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        f.parse().ok()
    };
    let (y, mo, da) = (next(&mut d)?, next(&mut d)?, next(&mut d)?);
    let (h, mi, se) = (next(&mut t)?, next(&mut t)?, next(&mut t)?);
    if d.next().is_some() || t.next().is_some() {
        return None;
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + se)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::super::{Trace, TraceError, TraceFormat};
    use super::*;
    use crate::units::Bandwidth;

    fn err(text: &str, format: Option<TraceFormat>) -> TraceError {
        Trace::parse(text, format).unwrap_err()
    }

    const CSV_HEADER: &str = "Timestamp,Longitude,DL_bitrate,State\n";

    #[test]
    fn rejects_empty_input() {
        assert_eq!(err("", None), TraceError::Empty);
        assert_eq!(err("\n\n", Some(TraceFormat::Mahimahi)), TraceError::Empty);
        assert_eq!(err("# c\n", Some(TraceFormat::Series)), TraceError::Empty);
        assert_eq!(err(CSV_HEADER, Some(TraceFormat::G5Csv)), TraceError::Empty);
        assert_eq!(err("", Some(TraceFormat::G5Csv)), TraceError::Empty);
    }

    #[test]
    fn rejects_non_numeric_fields() {
        let e = err("0\n12\nx7\n", Some(TraceFormat::Mahimahi));
        assert_eq!(
            e.to_string(),
            "line 3: expected one integer millisecond timestamp per line, got `x7`"
        );
        assert_eq!(err("0\n-5\n", None).line(), Some(2));
        assert_eq!(err("0\n1.5\n", None).line(), Some(2));
        let e = err("0 1\n1 fast\n", None);
        assert_eq!(
            e.to_string(),
            "line 2: expected `<seconds> <Mbit/s>`, got `1 fast`"
        );
        assert_eq!(err("0 1\n1 NaN\n", None).line(), Some(2));
        assert_eq!(err("0 1\n1 inf\n", None).line(), Some(2));
        assert_eq!(err("0 1\n1 2 3\n", None).line(), Some(2));
        assert_eq!(err("0 1\n7\n", None).line(), Some(2));
    }

    #[test]
    fn rejects_negative_and_absurd_rates() {
        let e = err("0 1\n1 -2\n", None);
        assert_eq!(
            e,
            TraceError::NegativeRate {
                line: 2,
                got: "-2".into()
            }
        );
        assert_eq!(e.to_string(), "line 2: negative rate `-2`");
        let e = err("0 1\n1 1e30\n", None);
        assert!(matches!(e, TraceError::RateTooHigh { line: 2, .. }), "{e}");
        let csv = format!("{CSV_HEADER}2020.01.01_00.00.00,1,-3,D\n");
        assert!(matches!(
            err(&csv, None),
            TraceError::NegativeRate { line: 2, .. }
        ));
    }

    #[test]
    fn rejects_time_going_backwards() {
        let e = err("0\n10\n9\n", None);
        assert_eq!(
            e.to_string(),
            "line 3: time goes backwards: `9` comes after `10`"
        );
        let e = err("# h\n0.0 1\n2.0 1\n\n1.5 1\n", None);
        assert!(
            matches!(e, TraceError::TimeWentBackwards { line: 5, .. }),
            "{e}"
        );
    }

    #[test]
    fn rejects_absurd_spans_and_tiny_series() {
        // 31 days in ms
        let e = err("0\n2678400000\n", None);
        assert!(matches!(e, TraceError::TooLong { line: 2, .. }), "{e}");
        let e = err("0 1\n1e300 1\n", None);
        assert!(matches!(e, TraceError::TooLong { line: 2, .. }), "{e}");
        assert_eq!(
            err("0 1\n", None),
            TraceError::TooFewSamples {
                format: TraceFormat::Series,
                found: 1
            }
        );
        assert_eq!(
            err("5 1\n5 2\n", None),
            TraceError::ZeroDuration { samples: 2 }
        );
        // a single mahimahi opportunity is a 1 ms trace
        assert_eq!(
            Trace::parse("7\n", None).unwrap().duration(),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn csv_spreads_rows_evenly_over_the_stamps() {
        // Duplicate and skipped stamps: 4 rows over 3 s -> starts 0, 1, 2, 3 s,
        // the last held for the median gap (1 s).
        let text = format!(
            "{CSV_HEADER}2020.01.16_23.59.58,-8.3,1000,D\n\
             2020.01.16_23.59.59,-8.3,2000,D\n\
             2020.01.16_23.59.59,-8.3,0,I\n\
             2020.01.17_00.00.01,-8.3,4000,D\n"
        );
        let t = Trace::parse(&text, None).unwrap();
        assert_eq!(t.format(), TraceFormat::G5Csv);
        assert_eq!(t.samples(), 4);
        assert_eq!(t.duration(), Duration::from_secs(4));
        assert_eq!(
            t.rate_series(Duration::from_secs(1)),
            vec![
                Bandwidth::from_mbps(1),
                Bandwidth::from_mbps(2),
                Bandwidth::ZERO,
                Bandwidth::from_mbps(4)
            ]
        );
    }

    #[test]
    fn csv_errors_name_the_line_and_column() {
        let e = err("Timestamp,Speed\n2020.01.01_00.00.00,1\n", None);
        assert_eq!(
            e.to_string(),
            "line 1: CSV header has no `DL_bitrate` column"
        );
        let text = format!("{CSV_HEADER}2020.01.01_00.00.00,1,5,D\n2020-01-01 00:00:01,1,5,D\n");
        let e = err(&text, None);
        assert_eq!(
            e.to_string(),
            "line 3: expected a `YYYY.MM.DD_HH.MM.SS` timestamp, got `2020-01-01 00:00:01`"
        );
        let text = format!("{CSV_HEADER}2020.01.01_00.00.00,1,five,D\n");
        assert!(err(&text, None)
            .to_string()
            .starts_with("line 2: expected a `DL_bitrate`"));
        let text = format!("{CSV_HEADER}2020.01.01_00.00.00\n");
        assert_eq!(err(&text, None).line(), Some(2));
        let text = format!("{CSV_HEADER}2020.01.01_00.00.05,1,5,D\n2020.01.01_00.00.04,1,5,D\n");
        assert!(matches!(
            err(&text, None),
            TraceError::TimeWentBackwards { line: 3, .. }
        ));
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_seconds("1970.01.01_00.00.00"), Some(0));
        assert_eq!(civil_seconds("2000.03.01_00.00.01"), Some(951_868_801));
        assert_eq!(
            civil_seconds("2020.01.01_00.00.00")
                .map(|a| a - civil_seconds("2019.12.31_23.59.59").unwrap_or(0)),
            Some(1)
        );
        for bad in [
            "",
            "2020.13.01_00.00.00",
            "2020.01.01",
            "2020.01.01_00.00",
            "2020.01.01_00.00.00.1",
            "+020.01.01_00.00.00",
        ] {
            assert_eq!(civil_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn quotes_are_short_and_escaped() {
        let q = shorten(&"x".repeat(500));
        assert_eq!(q.chars().count(), MAX_QUOTE_CHARS + 1);
        assert_eq!(shorten("a\tb\u{1b}"), "a\\tb\\u{1b}");
    }
}
