//! Pipe streaming: an ordered, verified byte stream over many TCP
//! connections and paths (seed 003; `braid send` / `braid recv`).
//!
//! The sender cuts its input into numbered blocks, each with its check, and
//! spreads them over N connections (connection `i` goes to address
//! `i mod A`, so several addresses are several paths). The receiver puts
//! blocks back in order within a bounded reorder window, verifies each block
//! before it writes it, acknowledges blocks, and at the end checks a BLAKE3
//! digest of the whole stream.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`digest`] | the block checks (BLAKE3; XXH3-128 under encryption) and the end-to-end digest over them |
//! | [`frame`] | wire format: hello, data/END/ABORT frames, control frames; [`ProtocolViolation`] |
//! | `error` | [`PipeError`] and [`ConfigError`]: one variant per cause |
//! | [`sched`], [`weighted`], [`reorder`] | re-exports of [`braid_core::bulk`]: the sans-IO scheduler, weighted buffers and reorder window |
//! | [`sender`], [`receiver`] | tokio drivers: one owner task per side, connection tasks, bounded channels |
//! | [`net`] | socket set-up (TCP or MPTCP, buffers, timeouts) |
//! | [`secure`], [`record`], [`code`] | the handshake every connection runs (Noise with the key, or a one-time code through SPAKE2), the AEAD records that carry what follows it (`--no-encrypt` payloads beside them, checked through their hash), the codes |
//! | [`stats`] | reports and progress snapshots |
//!
//! Secure by default: a connection authenticates ([`secure`]) before the
//! receiver keeps any state for it, and every byte after that is
//! authenticated: in AEAD records ([`record`], encrypted by default), or,
//! for `--no-encrypt` block payloads, through the BLAKE3 in their
//! authenticated header; only [`Security::Insecure`] (`--insecure`) sends
//! unauthenticated clear text.
//!
//! Invariants: nothing from the network can make either side panic or
//! allocate without a bound (block length ≤ [`frame::MAX_BLOCK_LEN`] and the
//! hello's limit, at most [`MAX_CONNECTIONS`] connections, window ≤
//! [`MAX_WINDOW_BLOCKS`]); a receiver allocates per-peer state only after a
//! hello with the right magic, version and session; no byte is written before
//! its block's checksum has been verified. One task per side owns the
//! scheduler or reorder state; the others talk to it over bounded channels,
//! once per block event (never per byte), and no lock is shared.
//! The precise rules are in `docs/pipe.md`.

pub mod code;
pub mod digest;
mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod net;
pub mod receiver;
pub mod record;
mod refusals;
pub mod secure;
pub mod sender;
pub mod stats;

pub use braid_core::bulk::{reorder, sched, weighted};

pub use code::Code;
pub use error::{ConfigError, PipeError};
pub use frame::ProtocolViolation;
pub use receiver::{Ended, Receiver, RecvConfig, ResumePoint, STOP_DRAIN};
pub use sched::{Layout, Mode};
pub use secure::{SecureCounts, SecureError, SecureStats, Security};
pub use sender::{send, send_async, send_until, SendConfig};
pub use stats::{Progress, RecvReport, SendReport};

/// Most connections one session may use.
pub const MAX_CONNECTIONS: usize = 64;
/// Largest reorder window in blocks.
pub const MAX_WINDOW_BLOCKS: u64 = 65_536;
/// Default block size in the weighted and round-robin modes (256 KiB).
pub const DEFAULT_BLOCK: u32 = 256 << 10;
/// Default largest block in adaptive mode (2 MiB). Adaptive blocks start
/// at [`sched::INITIAL_ADAPTIVE_BLOCK`] and then take [`sched::BLOCK_TIME`]
/// on the slowest connection, so only paths faster than about 42 Mbit/s
/// get blocks above 256 KiB; on those, each block's fixed costs (hand-offs
/// between tasks, system calls, acknowledgements) are spread over more
/// bytes.
pub const DEFAULT_ADAPTIVE_BLOCK: u32 = 2 << 20;
/// How often each side shows it is alive on an otherwise quiet
/// connection: the sender writes a keepalive frame while a connection has
/// no job, the receiver repeats its cumulative ack. Silence for much
/// longer means the path is down.
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(1);
/// Default reorder window in bytes (64 MiB).
pub const DEFAULT_WINDOW_BYTES: u64 = 64 << 20;
