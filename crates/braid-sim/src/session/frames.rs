//! Reading video frame-size trace files for session sources: the file is
//! read here and parsed by [`braid_core::trace::frames`] (formats, units
//! and the frame rate are documented there).
//!
//! Main items: [`load_frames`], [`FrameTraceError`]; [`FrameTrace`] and
//! [`FrameFormat`] are braid-core's.

use braid_core::trace::frames::{parse_frames, FrameParseError};
pub use braid_core::trace::frames::{FrameFormat, FrameTrace, MAX_FRAMES, MAX_FRAME_TRACE_BYTES};
use std::path::{Path, PathBuf};

/// Why a frame trace could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameTraceError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A line that is not a frame of the format.
    #[error("{}: line {line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// No frames, more than [`MAX_FRAMES`], or no time span to give a rate.
    #[error("{}: {message}", path.display())]
    Unusable {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Reads the frame trace at `path` (format detected from the first frame
/// line when `None`: three columns are MMGC, more are ASU).
///
/// # Errors
/// An unreadable file, a malformed line (named), no frames, too many, or
/// timestamps that span no time.
pub fn load_frames(
    path: &Path,
    format: Option<FrameFormat>,
) -> Result<FrameTrace, FrameTraceError> {
    let io = |source| FrameTraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(io)?,
            MAX_FRAME_TRACE_BYTES + 1,
        ),
        &mut text,
    )
    .map_err(io)?;
    if text.len() as u64 > MAX_FRAME_TRACE_BYTES {
        return Err(FrameTraceError::Unusable {
            path: path.to_path_buf(),
            message: format!("larger than {MAX_FRAME_TRACE_BYTES} bytes"),
        });
    }
    parse_frames(&text, format).map_err(|e| match e {
        FrameParseError::Line { line, message } => FrameTraceError::Parse {
            path: path.to_path_buf(),
            line,
            message,
        },
        other => FrameTraceError::Unusable {
            path: path.to_path_buf(),
            message: other.to_string(),
        },
    })
}
