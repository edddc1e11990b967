//! Where a stream's messages come from, as one line of text: the SOURCE
//! of `braid stream --stream NAME:SPEC:SOURCE`, of a session file's or a
//! simulator scenario's `[[stream]] source = "…"`. One grammar and one
//! parser: the runtime opens it (`braid::session::feed`), the simulator
//! turns it into a workload (`braid_sim::session::Workload`).
//!
//! | SOURCE | messages |
//! | --- | --- |
//! | `PATH` | a file, cut into the session's message size (runtime only) |
//! | `-` | stdin, likewise, until it closes (runtime only) |
//! | `cbr:RATE[:SIZE]` | SIZE-byte messages (default [`DEFAULT_CBR_SIZE`]) paced at RATE |
//! | `greedy[:SIZE]` | SIZE-byte messages (default [`DEFAULT_GREEDY_SIZE`]) as fast as the stream takes them |
//! | `trace:FILE[:FPS][:SIZE]` | one message per frame of a video frame-size trace ([`crate::trace::frames`]) at its frame rate or FPS; frames above SIZE (default [`MAX_MESSAGE_SIZE`]) are cut |
//!
//! RATE is a [`Bandwidth`] (`3mbit`), SIZE a [`ByteSize`] with its unit
//! (`1200B`, `64KiB`), FPS a plain number. In `trace:`, a trailing
//! `:NUMBER` is the frame rate and a trailing `:SIZE` (a number with a
//! unit) the message size, so file names may hold `:` themselves.
//! `Display` writes the same grammar back (`s.to_string().parse()` gives
//! `s`).

use super::spec_str::Rate;
use crate::units::{Bandwidth, ByteSize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Default size of a `cbr:` message: one packet's payload on a 1500-byte MTU.
pub const DEFAULT_CBR_SIZE: u32 = 1400;
/// Default size of a `greedy` message.
pub const DEFAULT_GREEDY_SIZE: u32 = 1200;
/// Largest message a source cuts (the session's default `max_message`).
pub const MAX_MESSAGE_SIZE: u32 = 1 << 20;

/// A SOURCE as written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SourceSpec {
    /// A file.
    File(PathBuf),
    /// Standard input.
    Stdin,
    /// Constant bit rate.
    Cbr {
        /// The rate.
        rate: Bandwidth,
        /// Bytes per message.
        size: u32,
    },
    /// Always a message ready.
    Greedy {
        /// Bytes per message.
        size: u32,
    },
    /// A video frame-size trace.
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Frames per second, when not the trace's own.
        fps: Option<f64>,
        /// Largest message a frame is cut into.
        size: u32,
    },
}

/// Why a SOURCE was refused (one line, naming the form expected).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceSpecError(pub String);

fn message_size(s: &str, text: &str, form: &str) -> Result<u32, SourceSpecError> {
    let b = s
        .parse::<ByteSize>()
        .map_err(|e| SourceSpecError(format!("source {text:?} (expected {form}): {e}")))?
        .bytes();
    if b == 0 || b > u64::from(MAX_MESSAGE_SIZE) {
        return Err(SourceSpecError(format!(
            "source {text:?}: the message size must be 1 B to 1 MiB"
        )));
    }
    // Invariant: b <= MAX_MESSAGE_SIZE fits in u32.
    Ok(b as u32)
}

impl FromStr for SourceSpec {
    type Err = SourceSpecError;

    fn from_str(s: &str) -> Result<Self, SourceSpecError> {
        let bad = |m: String| Err(SourceSpecError(m));
        if s == "-" {
            return Ok(SourceSpec::Stdin);
        }
        if let Some(rest) = s.strip_prefix("cbr:") {
            const FORM: &str = "cbr:RATE[:SIZE]";
            let (rate, size) = match rest.split_once(':') {
                Some((r, z)) => (r, Some(z)),
                None => (rest, None),
            };
            let rate: Bandwidth = match rate.parse() {
                Ok(r) => r,
                Err(e) => return bad(format!("source {s:?} (expected {FORM}): {e}")),
            };
            if rate == Bandwidth::ZERO {
                return bad(format!("source {s:?}: the rate must be above zero"));
            }
            let size = match size {
                None => DEFAULT_CBR_SIZE,
                Some(z) => message_size(z, s, FORM)?,
            };
            return Ok(SourceSpec::Cbr { rate, size });
        }
        if s == "greedy" {
            return Ok(SourceSpec::Greedy {
                size: DEFAULT_GREEDY_SIZE,
            });
        }
        if let Some(z) = s.strip_prefix("greedy:") {
            return Ok(SourceSpec::Greedy {
                size: message_size(z, s, "greedy[:SIZE]")?,
            });
        }
        if let Some(rest) = s.strip_prefix("trace:") {
            const FORM: &str = "trace:FILE[:FPS][:SIZE]";
            let mut path = rest;
            let mut size = None;
            let mut fps = None;
            // From the end: a SIZE (a number with a unit), then an FPS (a
            // plain number); anything else belongs to the file name.
            if let Some((p, tail)) = path.rsplit_once(':') {
                let unit = tail.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
                if !unit.is_empty()
                    && tail.parse::<f64>().is_err()
                    && tail.parse::<ByteSize>().is_ok()
                {
                    size = Some(message_size(tail, s, FORM)?);
                    path = p;
                }
            }
            if let Some((p, tail)) = path.rsplit_once(':') {
                if let Ok(f) = tail.parse::<f64>() {
                    if !(f.is_finite() && f > 0.0) {
                        return bad(format!("source {s:?}: the frame rate must be above zero"));
                    }
                    fps = Some(f);
                    path = p;
                }
            }
            if path.is_empty() {
                return bad(format!("source {s:?}: expected {FORM}"));
            }
            return Ok(SourceSpec::Trace {
                path: path.into(),
                fps,
                size: size.unwrap_or(MAX_MESSAGE_SIZE),
            });
        }
        if s.is_empty() {
            return bad(
                "empty source: expected a file, -, cbr:RATE[:SIZE], greedy[:SIZE] or trace:FILE[:FPS][:SIZE]".into(),
            );
        }
        Ok(SourceSpec::File(s.into()))
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::File(p) => write!(f, "{}", p.display()),
            SourceSpec::Stdin => f.write_str("-"),
            SourceSpec::Cbr { rate, size } => write!(f, "cbr:{}:{size}B", Rate(*rate)),
            SourceSpec::Greedy { size } => write!(f, "greedy:{size}B"),
            SourceSpec::Trace { path, fps, size } => {
                write!(f, "trace:{}", path.display())?;
                if let Some(x) = fps {
                    write!(f, ":{x}")?;
                }
                if *size != MAX_MESSAGE_SIZE {
                    write!(f, ":{size}B")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> SourceSpec {
        s.parse().unwrap()
    }

    #[test]
    fn every_form_parses() {
        assert_eq!(parse("-"), SourceSpec::Stdin);
        assert_eq!(
            parse("cbr:1mbit"),
            SourceSpec::Cbr {
                rate: Bandwidth::from_mbps(1),
                size: DEFAULT_CBR_SIZE
            }
        );
        assert_eq!(
            parse("cbr:2mbit:1000B"),
            SourceSpec::Cbr {
                rate: Bandwidth::from_mbps(2),
                size: 1000
            }
        );
        assert_eq!(parse("greedy"), SourceSpec::Greedy { size: 1200 });
        assert_eq!(parse("greedy:64KiB"), SourceSpec::Greedy { size: 65536 });
        assert_eq!(
            parse("trace:a:b.txt:30"),
            SourceSpec::Trace {
                path: "a:b.txt".into(),
                fps: Some(30.0),
                size: MAX_MESSAGE_SIZE
            }
        );
        assert_eq!(
            parse("trace:v/frame_trace_3:1200B"),
            SourceSpec::Trace {
                path: "v/frame_trace_3".into(),
                fps: None,
                size: 1200
            }
        );
        assert_eq!(
            parse("trace:v/f:25:1200B"),
            SourceSpec::Trace {
                path: "v/f".into(),
                fps: Some(25.0),
                size: 1200
            }
        );
        assert_eq!(parse("data.bin"), SourceSpec::File("data.bin".into()));
    }

    #[test]
    fn bad_sources_name_the_form() {
        let e = "cbr:fast".parse::<SourceSpec>().unwrap_err().to_string();
        assert!(e.contains("cbr:RATE[:SIZE]"), "{e}");
        assert!("cbr:0mbit".parse::<SourceSpec>().is_err());
        assert!("cbr:1mbit:2MiB".parse::<SourceSpec>().is_err());
        assert!("greedy:0B".parse::<SourceSpec>().is_err());
        assert!("trace:f:0".parse::<SourceSpec>().is_err());
        assert!("trace:".parse::<SourceSpec>().is_err());
        assert!("".parse::<SourceSpec>().is_err());
    }

    #[test]
    fn display_reads_back() {
        for s in [
            "-",
            "cbr:3mbit:1000B",
            "greedy:1200B",
            "trace:v/f",
            "trace:v/f:30",
            "trace:v/f:30:1200B",
            "some/file",
        ] {
            let p = parse(s);
            assert_eq!(p.to_string(), s, "written back exactly");
            assert_eq!(p.to_string().parse::<SourceSpec>().unwrap(), p, "{s}");
        }
    }
}
