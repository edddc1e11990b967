//! Loading trace files from disk for the simulator.
//!
//! `braid_core::trace` parses text and does no IO; this module reads the
//! file, parses it, and turns it into a [`RateSchedule`] for a link or a
//! trace-driven source. It is braid's one trace loader: the simulator,
//! the predictor study and the link emulator all read traces through it,
//! with one size bound ([`MAX_TRACE_FILE_BYTES`]). Main items:
//! [`load_trace`], [`load_schedule`], [`TraceFileError`] (displays as
//! `<path>: line N: …`, one line).

use braid_core::link::RateSchedule;
use braid_core::trace::{Trace, TraceError, TraceFormat};
use braid_core::Duration;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The largest trace file read (bytes); the largest real one braid has met
/// is about 3 MB.
pub const MAX_TRACE_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// Why a trace file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceFileError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The path names a folder.
    #[error("{}: it is a folder, not a trace file", path.display())]
    Folder {
        /// The path.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_TRACE_FILE_BYTES`].
    #[error("{}: file is {len} bytes, above the limit of {MAX_TRACE_FILE_BYTES}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least; a stream is read up to the limit).
        len: u64,
    },
    /// The file is not a valid trace.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong (with its line where there is one).
        source: TraceError,
    },
    /// The trace is valid but gives no usable rate series.
    #[error("{}: {message}", path.display())]
    Unusable {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Parses a format name: `mahimahi`, `series` (also `tsv`), `5g-csv` (also `5g`, `csv`).
pub fn parse_format(name: &str) -> Option<TraceFormat> {
    match name.to_ascii_lowercase().as_str() {
        "mahimahi" | "mm" => Some(TraceFormat::Mahimahi),
        "series" | "tsv" => Some(TraceFormat::Series),
        "5g-csv" | "5g" | "csv" => Some(TraceFormat::G5Csv),
        _ => None,
    }
}

/// Reads and parses the trace at `path` (format detected if `None`).
///
/// # Errors
/// [`TraceFileError::Io`] if it cannot be read, [`TraceFileError::Folder`]
/// for a folder, [`TraceFileError::TooLarge`] above
/// [`MAX_TRACE_FILE_BYTES`] (checked while reading, so a pipe cannot get
/// past it), [`TraceFileError::Parse`] if it is not a valid trace.
pub fn load_trace(path: &Path, format: Option<TraceFormat>) -> Result<Trace, TraceFileError> {
    let io = |source| TraceFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(TraceFileError::Folder {
            path: path.to_path_buf(),
        });
    }
    let too_large = |len| TraceFileError::TooLarge {
        path: path.to_path_buf(),
        len,
    };
    if meta.len() > MAX_TRACE_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut text = String::new();
    file.take(MAX_TRACE_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_TRACE_FILE_BYTES {
        return Err(too_large(text.len() as u64));
    }
    Trace::parse(&text, format).map_err(|source| TraceFileError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Loads the trace at `path` as a looping schedule with bins of `bin`, every
/// rate multiplied by `scale`.
///
/// # Errors
/// As [`load_trace`], plus [`TraceFileError::Unusable`] when the trace is
/// shorter than one bin or would need too many bins.
pub fn load_schedule(
    path: &Path,
    format: Option<TraceFormat>,
    bin: Duration,
    scale: f64,
) -> Result<RateSchedule, TraceFileError> {
    let trace = load_trace(path, format)?;
    let rates = trace
        .checked_rate_series(bin)
        .map_err(|source| TraceFileError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    let schedule = RateSchedule::new(bin, rates).map_err(|e| TraceFileError::Unusable {
        path: path.to_path_buf(),
        message: format!(
            "trace of {} gives no rate bins of {bin}: {e}",
            trace.duration()
        ),
    })?;
    Ok(if scale == 1.0 {
        schedule
    } else {
        schedule.scaled(scale)
    })
}
