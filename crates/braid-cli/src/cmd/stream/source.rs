//! Where a stream's bytes come from: the SOURCE of `--stream
//! NAME:SPEC:SOURCE`, and the producer that feeds one session stream.
//!
//! Main items: [`SourceSpec`] (what the user wrote), [`Source`] (opened and
//! checked, before anything connects), [`Outlet`] (where messages go: a
//! session stream, or a vector in tests), [`produce`] (the async loop),
//! [`Pacer`] (when message `k` is due).
//!
//! | SOURCE | messages |
//! | --- | --- |
//! | `PATH` | the file, cut into `--message-size` messages |
//! | `-` | stdin, likewise, until it closes |
//! | `cbr:RATE[:SIZE]` | SIZE-byte messages (default 1400 B) paced at RATE, until `--duration` or forever |
//! | `trace:FILE[:FPS]` | one message per frame of a video frame-size trace (MMGC or ASU, as braid-sim reads them), at the trace's frame rate or FPS |
//!
//! Awaiting [`Outlet::send`] is the backpressure: a paced source that falls
//! behind (the session holds its bound) sends late messages at once rather
//! than skipping them, like a blocking writer.

use anyhow::{bail, Context};
use braid_core::{Bandwidth, ByteSize, Duration, Instant};
use bytes::Bytes;
use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;
use tokio::io::AsyncReadExt;

/// Default size of a `cbr:` message: one packet's payload on a 1500-byte MTU.
pub const DEFAULT_CBR_SIZE: u32 = 1400;
/// Default message size for files and stdin. 16 KiB is about a dozen
/// packets: large enough that a message's own costs (a frame header, a
/// scheduler decision, an acknowledgement entry) are spread over many
/// bytes, small enough that the scheduler splits a stream across paths
/// finely and a 1 Mbit/s stream still gets a message every 130 ms.
pub const DEFAULT_MESSAGE_SIZE: u64 = 16 << 10;
/// Largest message a source cuts (the session's default `max_message`).
pub const MAX_MESSAGE_SIZE: u64 = 1 << 20;

/// A SOURCE as written, before anything is opened.
#[derive(Debug, Clone, PartialEq)]
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
    /// A video frame-size trace.
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Frames per second, when not the trace's own.
        fps: Option<f64>,
    },
}

impl FromStr for SourceSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        if s == "-" {
            return Ok(SourceSpec::Stdin);
        }
        if let Some(rest) = s.strip_prefix("cbr:") {
            let (rate, size) = match rest.split_once(':') {
                Some((r, z)) => (r, Some(z)),
                None => (rest, None),
            };
            let rate: Bandwidth = rate
                .parse()
                .with_context(|| format!("source {s:?} (expected cbr:RATE[:SIZE])"))?;
            if rate == Bandwidth::ZERO {
                bail!("source {s:?}: the rate must be above zero");
            }
            let size = match size {
                None => DEFAULT_CBR_SIZE,
                Some(z) => {
                    let b = z
                        .parse::<ByteSize>()
                        .with_context(|| format!("source {s:?} (expected cbr:RATE[:SIZE])"))?
                        .bytes();
                    if b == 0 || b > MAX_MESSAGE_SIZE {
                        bail!("source {s:?}: the message size must be 1 B to 1 MiB");
                    }
                    // Invariant: b <= MAX_MESSAGE_SIZE (1 MiB) fits in u32.
                    b as u32
                }
            };
            return Ok(SourceSpec::Cbr { rate, size });
        }
        if let Some(rest) = s.strip_prefix("trace:") {
            // FILE[:FPS]: a trailing ":NUMBER" is the frame rate (a file
            // name may hold ':' itself).
            let (path, fps) = match rest.rsplit_once(':') {
                Some((p, f)) if f.parse::<f64>().is_ok() => (p, f.parse::<f64>().ok()),
                _ => (rest, None),
            };
            if let Some(f) = fps {
                if !(f.is_finite() && f > 0.0) {
                    bail!("source {s:?}: the frame rate must be above zero");
                }
            }
            if path.is_empty() {
                bail!("source {s:?}: expected trace:FILE[:FPS]");
            }
            return Ok(SourceSpec::Trace {
                path: path.into(),
                fps,
            });
        }
        if s.is_empty() {
            bail!("empty source: expected a file, -, cbr:RATE[:SIZE] or trace:FILE[:FPS]");
        }
        Ok(SourceSpec::File(s.into()))
    }
}

impl std::fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceSpec::File(p) => write!(f, "{}", p.display()),
            SourceSpec::Stdin => f.write_str("-"),
            SourceSpec::Cbr { rate, size } => write!(f, "cbr:{rate}:{size}B"),
            SourceSpec::Trace { path, fps: None } => write!(f, "trace:{}", path.display()),
            SourceSpec::Trace { path, fps: Some(x) } => write!(f, "trace:{}:{x}", path.display()),
        }
    }
}

/// An opened source, ready to produce.
pub enum Source {
    /// File or stdin, cut into messages of `size`.
    Reader {
        /// What is read.
        reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
        /// Bytes per message (the last may be shorter).
        size: usize,
        /// When message `k` may go (a stream on a reservation, paced at
        /// its rate; `None`: as fast as the session takes them).
        pace: Option<Pacer>,
    },
    /// Messages of the given sizes, paced.
    Paced {
        /// When each is due.
        pacer: Pacer,
        /// Message sizes, in order; `None`: `size` forever.
        sizes: Option<Vec<u32>>,
        /// The size of every message when `sizes` is `None`.
        size: u32,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Reader { size, .. } => write!(f, "Reader({size} B messages)"),
            Source::Paced { pacer, sizes, size } => f
                .debug_struct("Paced")
                .field("pacer", pacer)
                .field("frames", &sizes.as_ref().map(Vec::len))
                .field("size", size)
                .finish(),
        }
    }
}

impl SourceSpec {
    /// Opens the source: a file that does not exist or a trace that does
    /// not read fails here, before anything connects.
    ///
    /// # Errors
    /// The file or trace, named, and why.
    pub fn open(&self, message_size: u64) -> anyhow::Result<Source> {
        // Invariant: message_size was checked to be 1..=MAX_MESSAGE_SIZE.
        let size = message_size.clamp(1, MAX_MESSAGE_SIZE) as usize;
        Ok(match self {
            SourceSpec::File(p) => {
                let f =
                    std::fs::File::open(p).with_context(|| format!("source {}", p.display()))?;
                Source::Reader {
                    reader: Box::new(tokio::fs::File::from_std(f)),
                    size,
                    pace: None,
                }
            }
            SourceSpec::Stdin => Source::Reader {
                reader: Box::new(tokio::io::stdin()),
                size,
                pace: None,
            },
            SourceSpec::Cbr { rate, size } => Source::Paced {
                pacer: Pacer::new(rate.transmit_time(u64::from(*size)).as_secs_f64()),
                sizes: None,
                size: *size,
            },
            SourceSpec::Trace { path, fps } => {
                let t = braid_sim::session::frames::load_frames(path, None)
                    .with_context(|| format!("source trace:{}", path.display()))?;
                let fps = fps.unwrap_or(t.fps);
                Source::Paced {
                    pacer: Pacer::new(1.0 / fps),
                    // A frame larger than a message is cut below; an empty
                    // frame is still one (1-byte) message, so frames keep
                    // their times.
                    sizes: Some(t.sizes),
                    size: 0,
                }
            }
        })
    }
}

impl Source {
    /// A file or stdin source paced at `rate` (a stream on a reservation);
    /// a generator (cbr:, trace:) keeps its own pace.
    pub fn paced_at(self, rate: Bandwidth) -> Source {
        match self {
            Source::Reader { reader, size, .. } if rate.bps() > 0 => Source::Reader {
                reader,
                size,
                pace: Some(Pacer::new(size as f64 * 8.0 / rate.bps() as f64)),
            },
            other => other,
        }
    }
}

/// When paced message `k` is due: `k · period` after the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacer {
    period_s: f64,
}

impl Pacer {
    /// One message every `period_s` seconds.
    pub fn new(period_s: f64) -> Pacer {
        Pacer { period_s }
    }

    /// The offset from the start at which message `k` is due.
    pub fn due(&self, k: u64) -> Duration {
        Duration::from_secs_f64(k as f64 * self.period_s)
    }
}

/// Where a producer's messages go.
pub trait Outlet {
    /// Hands one message over, waiting while the receiver is full.
    fn send(&mut self, data: Bytes) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// What a producer sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Produced {
    /// Messages.
    pub messages: u64,
    /// Payload bytes.
    pub bytes: u64,
}

/// A clock for paced sources: `now` on braid's time line, and a wait
/// until a given instant.
pub trait Clock {
    /// Now.
    fn now(&self) -> Instant;
    /// Returns at `at` (or at once, if it has passed).
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send;
}

/// The process clock (`braid::clock`) and tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        braid::clock::now()
    }
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send {
        let wait = at.saturating_duration_since(braid::clock::now());
        async move {
            // A message already due goes at once: tokio's timer ticks in
            // whole milliseconds, so even a zero sleep would cap a
            // source at about 1000 messages a second.
            if !wait.is_zero() {
                tokio::time::sleep(wait.into()).await;
            }
        }
    }
}

/// Sends everything `source` has into `out`: until the file or stdin
/// ends, the trace is played once, or `stop_after` has passed since the
/// start (paced sources only; `None`: a `cbr:` source runs forever).
///
/// # Errors
/// A read error, or the outlet's error (the session closed).
pub async fn produce<O: Outlet, C: Clock>(
    source: Source,
    out: &mut O,
    clock: &C,
    stop_after: Option<Duration>,
) -> anyhow::Result<Produced> {
    let mut done = Produced::default();
    let start = clock.now();
    match source {
        Source::Reader {
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
                    .context("reading the source")?;
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
                clock.sleep_until(start + p.due(done.messages)).await;
            }
            done.messages += 1;
            done.bytes += filled as u64;
            out.send(Bytes::from(buf)).await?;
        },
        Source::Paced { pacer, sizes, size } => {
            for k in 0u64.. {
                let msg_size = match &sizes {
                    None => size,
                    Some(s) => match s.get(k as usize) {
                        Some(&z) => z.max(1),
                        None => return Ok(done),
                    },
                };
                let due = pacer.due(k);
                if stop_after.is_some_and(|stop| due >= stop) {
                    return Ok(done);
                }
                clock.sleep_until(start + due).await;
                let mut left = u64::from(msg_size);
                while left > 0 {
                    let n = left.min(MAX_MESSAGE_SIZE);
                    left -= n;
                    done.messages += 1;
                    done.bytes += n;
                    out.send(Bytes::from(pattern(k, n as usize))).await?;
                }
            }
            Ok(done)
        }
    }
}

/// The bytes of paced message `k`: its number, repeated, so a capture
/// shows which message a packet belongs to.
fn pattern(k: u64, len: usize) -> Vec<u8> {
    k.to_be_bytes().iter().copied().cycle().take(len).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Default)]
    struct Collect(Vec<Bytes>);

    impl Outlet for Collect {
        fn send(&mut self, data: Bytes) -> impl Future<Output = anyhow::Result<()>> + Send {
            self.0.push(data);
            async { Ok(()) }
        }
    }

    /// A clock that jumps to each instant waited for.
    #[derive(Default)]
    struct FakeClock(AtomicU64);

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            Instant::from_nanos(self.0.load(Ordering::Relaxed))
        }
        fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send {
            self.0.fetch_max(at.as_nanos(), Ordering::Relaxed);
            async {}
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime builds")
            .block_on(f)
    }

    #[test]
    fn sources_parse_and_name_their_form() {
        assert_eq!("-".parse::<SourceSpec>().unwrap(), SourceSpec::Stdin);
        assert_eq!(
            "cbr:1mbit".parse::<SourceSpec>().unwrap(),
            SourceSpec::Cbr {
                rate: Bandwidth::from_mbps(1),
                size: 1400
            }
        );
        assert_eq!(
            "cbr:2mbit:1000B".parse::<SourceSpec>().unwrap(),
            SourceSpec::Cbr {
                rate: Bandwidth::from_mbps(2),
                size: 1000
            }
        );
        assert_eq!(
            "trace:a:b.txt:30".parse::<SourceSpec>().unwrap(),
            SourceSpec::Trace {
                path: "a:b.txt".into(),
                fps: Some(30.0)
            }
        );
        assert_eq!(
            "trace:v/frame_trace_3".parse::<SourceSpec>().unwrap(),
            SourceSpec::Trace {
                path: "v/frame_trace_3".into(),
                fps: None
            }
        );
        assert_eq!(
            "data.bin".parse::<SourceSpec>().unwrap(),
            SourceSpec::File("data.bin".into())
        );
        let e = format!("{:#}", "cbr:fast".parse::<SourceSpec>().unwrap_err());
        assert!(e.contains("cbr:RATE[:SIZE]"), "{e}");
        assert!("cbr:0mbit".parse::<SourceSpec>().is_err());
        assert!("cbr:1mbit:2MiB".parse::<SourceSpec>().is_err());
        assert!("trace:f:0".parse::<SourceSpec>().is_err());
    }

    #[test]
    fn a_missing_file_fails_at_open() {
        let e = SourceSpec::File("/nonexistent/braid-source".into())
            .open(DEFAULT_MESSAGE_SIZE)
            .unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/braid-source"));
    }

    #[test]
    fn pacer_counts_messages_due() {
        // 1 Mbit/s of 1250-byte messages: one every 10 ms.
        let p = Pacer::new(Bandwidth::from_mbps(1).transmit_time(1250).as_secs_f64());
        assert_eq!(p.due(0), Duration::ZERO);
        assert_eq!(p.due(3), Duration::from_millis(30));
        assert_eq!(p.due(100), Duration::from_secs(1));
    }

    #[test]
    fn cbr_sends_its_rate_over_a_fake_clock() {
        let source = SourceSpec::Cbr {
            rate: Bandwidth::from_mbps(1),
            size: 1250,
        }
        .open(DEFAULT_MESSAGE_SIZE)
        .unwrap();
        let mut out = Collect::default();
        let clock = FakeClock::default();
        let done = block_on(produce(
            source,
            &mut out,
            &clock,
            Some(Duration::from_secs(2)),
        ))
        .unwrap();
        // Messages due in [0, 2 s): one every 10 ms.
        assert_eq!(done.messages, 200);
        assert_eq!(done.bytes, 200 * 1250);
        assert_eq!(out.0.len(), 200);
        assert!(out.0.iter().all(|m| m.len() == 1250));
        assert_eq!(clock.now(), Instant::from_nanos(1_990_000_000));
    }

    #[test]
    fn a_file_is_cut_into_messages_and_arrives_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let source = Source::Reader {
            reader: Box::new(std::io::Cursor::new(data.clone())),
            size: 16 << 10,
            pace: None,
        };
        let mut out = Collect::default();
        let done = block_on(produce(source, &mut out, &FakeClock::default(), None)).unwrap();
        assert_eq!(done.messages, 7);
        assert!(out.0[..6].iter().all(|m| m.len() == 16 << 10));
        assert_eq!(out.0.concat(), data);
    }

    #[test]
    fn a_trace_sends_one_message_per_frame_at_its_rate() {
        let dir = std::env::temp_dir().join(format!("braid-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("frames");
        // MMGC: time_s size_bits is_I, 25 frames/s.
        std::fs::write(&file, "0.0 8000 1\n0.04 1600 0\n0.08 0 0\n0.12 800 0\n").unwrap();
        let source = SourceSpec::Trace {
            path: file,
            fps: None,
        }
        .open(DEFAULT_MESSAGE_SIZE)
        .unwrap();
        let mut out = Collect::default();
        let clock = FakeClock::default();
        let done = block_on(produce(source, &mut out, &clock, None)).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let sizes: Vec<usize> = out.0.iter().map(Bytes::len).collect();
        assert_eq!(sizes, vec![1000, 200, 1, 100]);
        assert_eq!(done.messages, 4);
        assert_eq!(clock.now(), Instant::from_nanos(120_000_000));
    }

    #[test]
    fn a_file_on_a_reservation_is_paced_at_its_rate() {
        let data = vec![7u8; 100_000];
        let source = Source::Reader {
            reader: Box::new(std::io::Cursor::new(data)),
            size: 16 << 10,
            pace: None,
        }
        // One 16 KiB message every 100 ms.
        .paced_at(Bandwidth::from_bps(16 * 1024 * 8 * 10));
        let mut out = Collect::default();
        let clock = FakeClock::default();
        let done = block_on(produce(source, &mut out, &clock, None)).unwrap();
        assert_eq!(done.bytes, 100_000);
        assert_eq!(done.messages, 7);
        // The 7th message went 6 periods after the start.
        assert_eq!(clock.now(), Instant::from_nanos(600_000_000));
    }
}
