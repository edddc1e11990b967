//! The frame workload of `braid perf`: one message per frame at a fixed
//! frame rate, with frame sizes from a real frame-size trace — seed 002's
//! "changing application" (§3.1), which its Table 1 runs over TCP and
//! IQ-RUDP.
//!
//! Main type: [`Frames`]. A frame is written when it is due (frame `k` at
//! `k / fps` after the start); a write blocks while the transport's send
//! queue is full (the seed's blocking write), so a slow transport falls
//! behind the schedule and then writes as fast as it is allowed.
//!
//! Invariant: every size is within `[min, max]` given to
//! [`Frames::from_trace`]; there is at least one frame.

use braid_core::{Bandwidth, Duration};
use std::sync::Arc;

/// Most frames read from a trace (about 9 hours at 30 frames/s).
pub const MAX_FRAMES: usize = 1 << 20;

/// Why a frame trace could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FramesError {
    /// No line had a positive frame size.
    #[error("the frame trace has no frame sizes")]
    Empty,
    /// The frame rate is not positive or not finite.
    #[error("the frame rate must be positive")]
    BadRate,
}

/// A fixed frame rate and the size of each frame, in bytes (cycled).
#[derive(Debug, Clone, PartialEq)]
pub struct Frames {
    fps: f64,
    sizes: Arc<[u64]>,
}

impl Frames {
    /// Frames of `size` bytes at `fps` per second.
    ///
    /// # Errors
    /// [`FramesError::BadRate`] unless `fps` is positive and finite.
    pub fn constant(fps: f64, size: u64) -> Result<Frames, FramesError> {
        if !(fps.is_finite() && fps > 0.0) {
            return Err(FramesError::BadRate);
        }
        Ok(Frames {
            fps,
            sizes: Arc::from([size.max(1)]),
        })
    }

    /// Frames at `fps` whose sizes follow the trace `text` — one frame per
    /// line, its size in **bits** in the second whitespace-separated column
    /// (the MMGC `time size_bits is_I` format) or the only one — scaled so
    /// that the mean offered load is `mean`, each clamped to `[min, max]`
    /// bytes. Lines without a positive number are skipped; at most
    /// [`MAX_FRAMES`] frames are read.
    ///
    /// # Errors
    /// [`FramesError`] if the rate is bad or no line has a size.
    pub fn from_trace(
        text: &str,
        fps: f64,
        mean: Bandwidth,
        min: u64,
        max: u64,
    ) -> Result<Frames, FramesError> {
        if !(fps.is_finite() && fps > 0.0) {
            return Err(FramesError::BadRate);
        }
        let bits: Vec<f64> = text
            .lines()
            .filter_map(|l| {
                let mut cols = l.split_whitespace();
                let first = cols.next()?;
                cols.next().unwrap_or(first).parse::<f64>().ok()
            })
            .filter(|b| b.is_finite() && *b > 0.0)
            .take(MAX_FRAMES)
            .collect();
        if bits.is_empty() {
            return Err(FramesError::Empty);
        }
        let mean_bits = bits.iter().sum::<f64>() / bits.len() as f64;
        let k = mean.bps() as f64 / fps / mean_bits;
        let (lo, hi) = (min.max(1), max.max(min.max(1)));
        let sizes: Arc<[u64]> = bits
            .iter()
            .map(|b| ((b * k / 8.0).round() as u64).clamp(lo, hi))
            .collect();
        Ok(Frames { fps, sizes })
    }

    /// Frames per second.
    pub fn fps(&self) -> f64 {
        self.fps
    }

    /// The size of frame `k` (the trace repeats).
    pub fn size(&self, k: u64) -> u64 {
        self.sizes[(k % self.sizes.len() as u64) as usize]
    }

    /// The largest frame.
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(1)
    }

    /// Number of frames in one pass of the trace.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether there are no frames (never: see the module invariant).
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// When frame `k` is due, after the start.
    pub fn due(&self, k: u64) -> Duration {
        Duration::from_nanos((k as f64 * 1e9 / self.fps) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_is_scaled_to_the_mean_and_clamped() {
        let text = "0.0 1000 1\n0.033 3000 0\n# comment\n0.066 2000 0\n";
        let f = Frames::from_trace(text, 10.0, Bandwidth::from_bps(160_000), 1, 1 << 20)
            .expect("valid trace");
        // Mean 2000 bits → 16 000 bits per frame at 10 fps: factor 8.
        assert_eq!(f.len(), 3);
        assert_eq!((f.size(0), f.size(1), f.size(2)), (1000, 3000, 2000));
        assert_eq!(f.size(3), 1000, "the trace repeats");
        assert_eq!(f.max_size(), 3000);
        let c = Frames::from_trace(text, 10.0, Bandwidth::from_bps(160_000), 1500, 2500)
            .expect("valid trace");
        assert_eq!((c.size(0), c.size(1), c.size(2)), (1500, 2500, 2000));
        assert_eq!(f.due(5), Duration::from_millis(500));
    }

    #[test]
    fn one_column_traces_and_errors() {
        let f = Frames::from_trace("800\n800\n", 1.0, Bandwidth::from_bps(800), 1, 10_000)
            .expect("valid trace");
        assert_eq!(f.size(0), 100);
        assert_eq!(
            Frames::from_trace("x y\n", 1.0, Bandwidth::from_bps(1), 1, 9),
            Err(FramesError::Empty)
        );
        assert_eq!(Frames::constant(0.0, 5), Err(FramesError::BadRate));
        assert_eq!(Frames::constant(30.0, 5).expect("valid").size(7), 5);
    }
}
