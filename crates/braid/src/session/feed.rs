//! Where a stream's bytes come from: a file, stdin, a constant-rate
//! generator or a video frame-size trace, and the loop that feeds one
//! session [`Stream`] from it. `braid stream --stream NAME:SPEC:SOURCE`
//! is this, written as a string.
//!
//! Main items: [`SourceSpec`] (what the user wrote, braid-core's one
//! grammar: `cbr:3mbit`, `greedy`, `trace:FILE:30`, a path or `-`),
//! [`Feed`] ([`Feed::open`]: opened and checked, before anything connects), [`Cadence`] (when message `k` is
//! due), [`Outlet`] (where messages go: a [`Stream`], or anything else),
//! [`feed`] and [`feed_stream`] (the async loop), [`FeedError`].
//!
//! | SOURCE | messages |
//! | --- | --- |
//! | `PATH` | the file, cut into messages of the message size |
//! | `-` | stdin, likewise, until it closes |
//! | `cbr:RATE[:SIZE]` | SIZE-byte messages (default 1400 B) paced at RATE, until the stop time or forever |
//! | `greedy[:SIZE]` | SIZE-byte messages (default 1200 B) as fast as the session takes them, until the stop time or forever |
//! | `trace:FILE[:FPS][:SIZE]` | one message per frame of a video frame-size trace (MMGC or ASU, [`braid_core::trace::frames`]), at the trace's frame rate or FPS, frames above SIZE cut |
//!
//! Awaiting [`Outlet::send`] is the backpressure: a paced feed that falls
//! behind (the session holds its bound) sends late messages at once rather
//! than skipping them, like a blocking writer. Time is read through
//! [`crate::clock`], so a feed runs on tokio's paused clock in tests.
//!
//! ```no_run
//! use braid::session::feed::{feed_stream, Feed, SourceSpec, DEFAULT_MESSAGE_SIZE};
//! # async fn demo(stream: braid::session::Stream) -> Result<(), Box<dyn std::error::Error>> {
//! let spec: SourceSpec = "cbr:3mbit:1000B".parse()?;
//! let feed = Feed::open(&spec, DEFAULT_MESSAGE_SIZE)?;
//! let fed = feed_stream(feed, stream, Some(braid_core::Duration::from_secs(10))).await?;
//! println!("{} messages, {} bytes", fed.messages, fed.bytes);
//! # Ok(()) }
//! ```

use super::{SessionError, Stream};
use braid_core::trace::frames::{parse_frames, FrameParseError};
use braid_core::{Bandwidth, Duration};
use bytes::Bytes;
use std::future::Future;
use std::io::Read as _;
use std::path::PathBuf;
use tokio::io::AsyncReadExt;

pub use braid_core::session::source_spec::{
    SourceSpec, SourceSpecError, DEFAULT_CBR_SIZE, DEFAULT_GREEDY_SIZE, MAX_MESSAGE_SIZE,
};

/// Default message size for files and stdin. 16 KiB is about a dozen
/// packets: large enough that a message's own costs (a frame header, a
/// scheduler decision, an acknowledgement entry) are spread over many
/// bytes, small enough that the scheduler splits a stream across paths
/// finely and a 1 Mbit/s stream still gets a message every 130 ms.
pub const DEFAULT_MESSAGE_SIZE: u64 = 16 << 10;
pub use braid_core::trace::frames::MAX_FRAME_TRACE_BYTES;

/// What can go wrong with a feed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FeedError {
    /// The SOURCE text is not one (the message says what was expected).
    #[error(transparent)]
    Spec(#[from] SourceSpecError),
    /// The source cannot run here (a simulator-only form, or the like).
    #[error("{0}")]
    Unsupported(String),
    /// A file could not be opened.
    #[error("source {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A frame trace is not usable.
    #[error("source trace:{}: {message}", path.display())]
    Trace {
        /// The file.
        path: PathBuf,
        /// Why (with its line where there is one).
        message: String,
    },
    /// Reading the file or stdin failed.
    #[error("reading the source: {0}")]
    Read(#[source] std::io::Error),
    /// The session did not take a message (it closed, or the sink refused
    /// the stream).
    #[error("sending into the session")]
    Send(#[source] SessionError),
}

impl FeedError {
    /// The sink's reason when it refused the stream.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            FeedError::Send(SessionError::Core(
                braid_core::session::SessionError::StreamRefused { reason, .. },
            )) => Some(reason),
            _ => None,
        }
    }
}

/// An opened feed, ready to produce.
pub struct Feed(Inner);

enum Inner {
    /// File or stdin, cut into messages of `size`.
    Reader {
        reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
        size: usize,
        /// When message `k` may go (`None`: as fast as the session takes them).
        pace: Option<Cadence>,
    },
    /// Messages of the given sizes, paced, each cut at `cut`.
    Paced {
        cadence: Cadence,
        /// Message sizes, in order; `None`: `size` forever.
        sizes: Option<Vec<u32>>,
        size: u32,
        cut: u32,
    },
    /// `size`-byte messages as fast as the outlet takes them.
    Greedy { size: u32 },
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Inner::Reader { size, pace, .. } => f
                .debug_struct("Reader")
                .field("size", size)
                .field("pace", pace)
                .finish(),
            Inner::Paced {
                cadence,
                sizes,
                size,
                cut,
            } => f
                .debug_struct("Paced")
                .field("cadence", cadence)
                .field("frames", &sizes.as_ref().map(Vec::len))
                .field("size", size)
                .field("cut", cut)
                .finish(),
            Inner::Greedy { size } => f.debug_struct("Greedy").field("size", size).finish(),
        }
    }
}

impl Feed {
    /// Opens `spec`: a file that does not exist or a trace that does not
    /// read fails here, before anything connects. `message_size` cuts
    /// files and stdin (clamped to 1 B ..= [`MAX_MESSAGE_SIZE`]).
    ///
    /// # Errors
    /// [`FeedError::Open`] or [`FeedError::Trace`], naming the file.
    pub fn open(spec: &SourceSpec, message_size: u64) -> Result<Feed, FeedError> {
        let size = message_size.clamp(1, u64::from(MAX_MESSAGE_SIZE)) as usize;
        Ok(Feed(match spec {
            SourceSpec::File(p) => {
                let f = std::fs::File::open(p).map_err(|source| FeedError::Open {
                    path: p.clone(),
                    source,
                })?;
                Inner::Reader {
                    reader: Box::new(tokio::fs::File::from_std(f)),
                    size,
                    pace: None,
                }
            }
            SourceSpec::Stdin => Inner::Reader {
                reader: Box::new(tokio::io::stdin()),
                size,
                pace: None,
            },
            SourceSpec::Cbr { rate, size } => Inner::Paced {
                cadence: Cadence::new(rate.transmit_time(u64::from(*size)).as_secs_f64()),
                sizes: None,
                size: *size,
                cut: MAX_MESSAGE_SIZE,
            },
            SourceSpec::Greedy { size } => Inner::Greedy { size: *size },
            SourceSpec::Trace { path, fps, size } => {
                let t = Self::read_frames(path)?;
                let fps = fps.unwrap_or(t.fps);
                Inner::Paced {
                    cadence: Cadence::new(1.0 / fps),
                    // A frame larger than `size` is cut below; an empty
                    // frame is still one (1-byte) message, so frames keep
                    // their times.
                    sizes: Some(t.sizes),
                    size: 0,
                    cut: (*size).clamp(1, MAX_MESSAGE_SIZE),
                }
            }
            other => {
                return Err(FeedError::Unsupported(format!(
                    "source {other} cannot run here"
                )))
            }
        }))
    }

    /// Reads and parses a frame trace, at most [`MAX_FRAME_TRACE_BYTES`].
    fn read_frames(
        path: &std::path::Path,
    ) -> Result<braid_core::trace::frames::FrameTrace, FeedError> {
        let trace_err = |message: String| FeedError::Trace {
            path: path.to_path_buf(),
            message,
        };
        let file = std::fs::File::open(path).map_err(|e| trace_err(e.to_string()))?;
        let mut text = String::new();
        file.take(MAX_FRAME_TRACE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| trace_err(e.to_string()))?;
        if text.len() as u64 > MAX_FRAME_TRACE_BYTES {
            return Err(trace_err(format!(
                "larger than {MAX_FRAME_TRACE_BYTES} bytes"
            )));
        }
        parse_frames(&text, None).map_err(|e: FrameParseError| trace_err(e.to_string()))
    }

    /// A feed reading `reader`, cut into messages of `size` bytes (the
    /// last may be shorter), as fast as the session takes them.
    pub fn from_reader(
        reader: impl tokio::io::AsyncRead + Send + Unpin + 'static,
        size: usize,
    ) -> Feed {
        Feed(Inner::Reader {
            reader: Box::new(reader),
            size: size.clamp(1, MAX_MESSAGE_SIZE as usize),
            pace: None,
        })
    }

    /// A file or stdin feed paced at `rate` (a stream on a reservation);
    /// a generator (cbr:, trace:) keeps its own pace.
    pub fn paced_at(self, rate: Bandwidth) -> Feed {
        match self.0 {
            Inner::Reader { reader, size, .. } if rate.bps() > 0 => Feed(Inner::Reader {
                reader,
                size,
                pace: Some(Cadence::new(size as f64 * 8.0 / rate.bps() as f64)),
            }),
            other => Feed(other),
        }
    }
}

/// When paced message `k` is due: `k · period` after the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cadence {
    period_s: f64,
}

impl Cadence {
    /// One message every `period_s` seconds.
    pub fn new(period_s: f64) -> Cadence {
        Cadence { period_s }
    }

    /// The offset from the start at which message `k` is due.
    pub fn due(&self, k: u64) -> Duration {
        Duration::from_secs_f64(k as f64 * self.period_s)
    }
}

/// Where a feed's messages go.
pub trait Outlet {
    /// Hands one message over, waiting while the receiver is full.
    fn send(&mut self, data: Bytes) -> impl Future<Output = Result<(), SessionError>> + Send;
}

impl Outlet for Stream {
    // `async fn` would not promise `Send`, which a spawned feed needs.
    #[allow(clippy::manual_async_fn)]
    fn send(&mut self, data: Bytes) -> impl Future<Output = Result<(), SessionError>> + Send {
        Stream::send(self, data)
    }
}

/// What a feed sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fed {
    /// Messages.
    pub messages: u64,
    /// Payload bytes.
    pub bytes: u64,
}

/// Waits until `start + offset` on [`crate::clock`] (at once if passed).
async fn sleep_until(start: braid_core::Instant, offset: Duration) {
    let wait = (start + offset).saturating_duration_since(crate::clock::now());
    // A message already due goes at once: tokio's timer ticks in whole
    // milliseconds, so even a zero sleep would cap a feed at about 1000
    // messages a second.
    if !wait.is_zero() {
        tokio::time::sleep(wait.into()).await;
    }
}

/// Sends everything `feed` has into `out`: until the file or stdin ends,
/// the trace is played once, or `stop_after` has passed since the start
/// (paced feeds only; `None`: a `cbr:` feed runs forever).
///
/// # Errors
/// [`FeedError::Read`], or [`FeedError::Send`] when the outlet refuses.
pub async fn feed<O: Outlet>(
    feed: Feed,
    out: &mut O,
    stop_after: Option<Duration>,
) -> Result<Fed, FeedError> {
    let mut done = Fed::default();
    let start = crate::clock::now();
    match feed.0 {
        Inner::Reader {
            mut reader,
            size,
            pace,
        } => loop {
            let mut buf = vec![0u8; size];
            let mut filled = 0;
            while filled < size {
                let n = reader
                    .read(&mut buf[filled..])
                    .await
                    .map_err(FeedError::Read)?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                return Ok(done);
            }
            buf.truncate(filled);
            if let Some(p) = &pace {
                // Message k (0-based) is due k periods after the start.
                sleep_until(start, p.due(done.messages)).await;
            }
            done.messages += 1;
            done.bytes += filled as u64;
            out.send(Bytes::from(buf)).await.map_err(FeedError::Send)?;
        },
        Inner::Greedy { size } => {
            let mut k = 0u64;
            while stop_after.is_none_or(|stop| crate::clock::now() - start < stop) {
                done.messages += 1;
                done.bytes += u64::from(size);
                out.send(Bytes::from(pattern(k, size as usize)))
                    .await
                    .map_err(FeedError::Send)?;
                k += 1;
            }
            Ok(done)
        }
        Inner::Paced {
            cadence,
            sizes,
            size,
            cut,
        } => {
            for k in 0u64.. {
                let msg_size = match &sizes {
                    None => size,
                    Some(s) => match s.get(k as usize) {
                        Some(&z) => z.max(1),
                        None => return Ok(done),
                    },
                };
                let due = cadence.due(k);
                if stop_after.is_some_and(|stop| due >= stop) {
                    return Ok(done);
                }
                sleep_until(start, due).await;
                let mut left = u64::from(msg_size);
                while left > 0 {
                    let n = left.min(u64::from(cut));
                    left -= n;
                    done.messages += 1;
                    done.bytes += n;
                    out.send(Bytes::from(pattern(k, n as usize)))
                        .await
                        .map_err(FeedError::Send)?;
                }
            }
            Ok(done)
        }
    }
}

/// [`feed`] into `stream`, then [`Stream::finish`] it (waits until the
/// sink has it all).
///
/// # Errors
/// As [`feed`], and [`FeedError::Send`] when finishing fails.
pub async fn feed_stream(
    f: Feed,
    mut stream: Stream,
    stop_after: Option<Duration>,
) -> Result<Fed, FeedError> {
    let fed = feed(f, &mut stream, stop_after).await?;
    stream.finish().await.map_err(FeedError::Send)?;
    Ok(fed)
}

/// The bytes of paced message `k`: its number, repeated, so a capture
/// shows which message a packet belongs to.
fn pattern(k: u64, len: usize) -> Vec<u8> {
    k.to_be_bytes().iter().copied().cycle().take(len).collect()
}
