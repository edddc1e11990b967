//! Video frame-size traces (seed 000 §VI's layered video): text into
//! frame sizes in bytes, in display order, and the frame rate. Sans-IO:
//! the simulator (`braid_sim::session::frames::load_frames`) and the
//! runtime's stream feeds (`braid::session::feed`) read the file and
//! parse it here.
//!
//! Main items: [`parse_frames`], [`FrameTrace`], [`FrameFormat`],
//! [`FrameParseError`]. Two formats are read (see
//! `../shared/data/SOURCES.md`, "Video frame-size traces"):
//! * **MMGC** (`mmgc2019_live_sports/frame_trace_*`): `time_s size_bits is_I`,
//!   one line per frame in display order;
//! * **ASU verbose** (`asu_h264/*_verbose`): `frame_no time_ms type size_bits
//!   PSNR…`, lines in coding order (sorted here by frame number), an
//!   optional `#` header.
//!
//! Sizes are in bits in both and become bytes (rounded down). The frame
//! rate is the trace's own: frames less one over the time they span.

/// Largest frame-trace file read, bytes (the largest shared one is about
/// 2 MB); both readers (the simulator's and the runtime's feeds) hold to it.
pub const MAX_FRAME_TRACE_BYTES: u64 = 64 << 20;

/// Most frames read from one file (the largest shared trace has 75 k).
pub const MAX_FRAMES: usize = 1 << 22;

/// A frame trace's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameFormat {
    /// `time_s size_bits is_I` (MMGC 2019 live-streaming challenge).
    Mmgc,
    /// `frame_no time_ms type size_bits PSNR…` (ASU video trace library).
    Asu,
}

impl FrameFormat {
    /// Parses `mmgc` or `asu`.
    pub fn parse(name: &str) -> Option<FrameFormat> {
        match name.to_ascii_lowercase().as_str() {
            "mmgc" => Some(FrameFormat::Mmgc),
            "asu" => Some(FrameFormat::Asu),
            _ => None,
        }
    }
}

/// Why a text is not a usable frame trace.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameParseError {
    /// A line that is not a frame of the format.
    #[error("line {line}: {message}")]
    Line {
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// No frames, more than [`MAX_FRAMES`], or no time span to give a rate.
    #[error("{0}")]
    Unusable(String),
}

/// Frame sizes and rate of one trace.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameTrace {
    /// Frame sizes in bytes, in display order.
    pub sizes: Vec<u32>,
    /// Frames per second.
    pub fps: f64,
}

/// (time in seconds, frame number, size in bits) of each frame line.
type Row = (f64, f64, f64);

/// Parses a frame trace (format detected from the first frame line when
/// `None`: three columns are MMGC, more are ASU).
///
/// # Errors
/// A malformed line (named), no frames, more than [`MAX_FRAMES`], or
/// timestamps that span no time.
pub fn parse_frames(
    text: &str,
    format: Option<FrameFormat>,
) -> Result<FrameTrace, FrameParseError> {
    let line_err = |line: usize, message: String| FrameParseError::Line { line, message };
    let mut format = format;
    let mut rows: Vec<Row> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let f = *format.get_or_insert(if cols.len() <= 3 {
            FrameFormat::Mmgc
        } else {
            FrameFormat::Asu
        });
        let num = |k: usize, what: &str| -> Result<f64, FrameParseError> {
            cols.get(k)
                .and_then(|c| c.parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    line_err(
                        i + 1,
                        format!("expected a number for {what} in column {}", k + 1),
                    )
                })
        };
        let row = match f {
            FrameFormat::Mmgc => (
                num(0, "time (s)")?,
                rows.len() as f64,
                num(1, "size (bits)")?,
            ),
            FrameFormat::Asu => (
                num(1, "time (ms)")? / 1000.0,
                num(0, "frame number")?,
                num(3, "size (bits)")?,
            ),
        };
        if row.2 < 0.0 {
            return Err(line_err(i + 1, "negative frame size".into()));
        }
        if rows.len() >= MAX_FRAMES {
            return Err(FrameParseError::Unusable(format!(
                "more than {MAX_FRAMES} frames"
            )));
        }
        rows.push(row);
    }
    if rows.len() < 2 {
        return Err(FrameParseError::Unusable("fewer than two frames".into()));
    }
    // Display order (ASU lists frames in coding order).
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (t0, t1) = rows
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
            (lo.min(r.0), hi.max(r.0))
        });
    let span = t1 - t0;
    if span.is_nan() || span <= 0.0 {
        return Err(FrameParseError::Unusable(
            "the frames' timestamps span no time".into(),
        ));
    }
    Ok(FrameTrace {
        fps: (rows.len() - 1) as f64 / span,
        sizes: rows.iter().map(|r| (r.2 / 8.0) as u32).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mmgc_frames_in_bytes_at_their_rate() {
        let t = parse_frames("-2.0 8000.0 1\n-1.96 1600.0 0\n-1.92 800 0\n", None).unwrap();
        assert_eq!(t.sizes, vec![1000, 200, 100]);
        assert!((t.fps - 25.0).abs() < 1e-9, "{}", t.fps);
    }

    #[test]
    fn reads_asu_frames_in_display_order() {
        let text = "# Frame Time Type Size\n0\t0.0\tI\t800\t1\t1\t1\n2\t66.6667\tP\t240\t1\t1\t1\n1\t33.3333\tB\t80\t1\t1\t1\n";
        let t = parse_frames(text, None).unwrap();
        assert_eq!(t.sizes, vec![100, 10, 30]);
        assert!((t.fps - 30.0).abs() < 1e-3, "{}", t.fps);
    }

    #[test]
    fn a_bad_line_is_named() {
        let e = parse_frames("0.0 8000 1\n0.04 lots 0\n", None).unwrap_err();
        assert!(matches!(e, FrameParseError::Line { line: 2, .. }), "{e}");
        assert!(parse_frames("0.0 8000 1\n", None).is_err());
        assert!(parse_frames("", Some(FrameFormat::Asu)).is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any text either reads as frames (at least two, a positive rate)
        /// or is refused; it never panics.
        #[test]
        fn any_text_is_frames_or_an_error(text in "[0-9a-zA-Z .#\t\n-]{0,200}") {
            if let Ok(t) = parse_frames(&text, None) {
                prop_assert!(t.sizes.len() >= 2);
                prop_assert!(t.fps > 0.0 && t.fps.is_finite());
            }
        }
    }
}
