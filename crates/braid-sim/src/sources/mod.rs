//! Built-in traffic sources: greedy (window-limited with acks), paced
//! constant-bit-rate, and paced trace replay (cross traffic).
//!
//! Main types: [`GreedySource`] with [`GreedyConfig`], [`PacedSource`].
//! Every data packet carries the [`crate::wire`] header (type and sequence
//! number) and is otherwise size-only.
//!
//! # Greedy source
//! Always has data. It keeps the bottleneck busy without overflowing its
//! queue by sizing its window from the queueing delay it sees and the rate
//! the path delivers, using one ack per packet from the [`crate::Sink`]:
//! - while the queueing delay (`rtt − min_rtt`) is below `queue_target`,
//!   the window grows by `size × (1 − queueing / queue_target)` per acked
//!   packet: doubling per round trip on an empty queue, slowing to nothing
//!   at the target;
//! - at or above the target, `window = max(4 packets, rate × (min_rtt +
//!   queue_target))`, where `rate` is the latest delivery-rate sample (bytes
//!   acked between a packet's send and its ack, over that span, as BBR
//!   measures it). At the fixed point the link runs at capacity with a
//!   standing queue of about `capacity × queue_target`; when capacity falls
//!   the window follows within a round trip; when it rises the queue drains
//!   and growth resumes.
//! - a packet is declared lost when an ack for a packet [`REORDER_THRESHOLD`]
//!   or more sequence numbers later arrives; losses halve `queue_target`
//!   (at most once per round trip, not below 5 ms; it returns to the
//!   configured value after a loss-free second).
//! - no ack for a retransmission timeout (`srtt + 4·rttvar`, at least
//!   200 ms, doubling on each consecutive timeout up to ×8) marks everything
//!   in flight as presumed lost and sends a single probe packet per timeout
//!   until an ack arrives. Presumed-lost packets that are acked later (they
//!   were only stuck behind an outage) still count as delivered, so the rate
//!   samples after an outage are right.
//! - With `window` set, the window is fixed instead.
//!
//! There are no retransmissions: the sink's sequence gaps are the loss.
//! The window is bounded by [`MAX_WINDOW_BYTES`], and the records of packets
//! in flight by [`MAX_TRACKED_PACKETS`].
//!
//! # Paced source
//! Sends `packet`-byte datagrams spaced by their serialization time at a
//! rate that is constant (CBR) or follows a looping rate schedule from a
//! trace (time zero of the schedule is the flow's start). A zero rate pauses
//! sending until the rate returns (see [`braid_core::link::capacity`]).

mod greedy;
mod paced;

pub use greedy::{
    GreedyConfig, GreedySource, MAX_TRACKED_PACKETS, MAX_WINDOW_BYTES, REORDER_THRESHOLD,
};
pub use paced::PacedSource;
