//! The seed's adaptive applications (seed 002 §3.1, §3.3–3.5) as an
//! [`App`]: [`FrameApp`].
//!
//! # Traffic ([`Pattern`])
//! - [`Pattern::FixedRate`] — the "changing application": frames at a
//!   fixed frame rate, frame `k` holding `packets[k]` messages (read from a
//!   real frame-size trace). A frame waits while the send queue is full
//!   (the seed's blocking `CMwritev_attr()`), so a slow transport
//!   lengthens the run instead of dropping frames.
//! - [`Pattern::Greedy`] — the "changing network" application: one message
//!   per frame, sent as fast as the transport takes them.
//!
//! Each message is one application packet of the current *resolution*
//! (size, below the transport's segment, as the seed's window rule needs).
//!
//! # Adaptation ([`Adaptation`]) on loss-ratio threshold events
//! - **Marking** (§3.3): every 5th message is *tagged* (control data,
//!   reliable). After the upper callback with error ratio `e`, each other
//!   message is *unmarked* with probability `max(0.40, 1.25·e)` (a seeded
//!   ChaCha8 coin), the rest reliable; the lower callback cuts that
//!   probability by 20 %. Unmarked messages go as `Discardable` when
//!   coordinated (and the report makes the transport drop them before
//!   sending) and as `Unreliable` when not (sent once, never retransmitted —
//!   "RUDP continues to send all application packets").
//! - **Resolution** (§3.4–3.5): the upper callback shrinks the message size
//!   by `rate_chg = e`, the lower one grows it by 10 % (up to the initial
//!   size). With `granularity` g > 1 the change takes effect only at the
//!   next frame whose number is divisible by g (§3.5).
//!
//! # Coordination ([`Coordination`])
//! Uncoordinated apps report nothing (the seed's RUDP). Coordinated ones
//! report every change as an ADAPT frame: marking → `Marking`, resolution
//! → `PacketSize` with `Now` (g = 1), or `Deferred` at the callback and
//! `AtMessage` at the frame where it happens (g > 1; §3.5 scheme 2);
//! [`Coordination::CoordinatedCond`] adds ADAPT_COND with the error ratio
//! and delivery rate seen at the callback (scheme 3, formula (1)).
//!
//! Threshold conditions re-arm at their own level (`LossAbove { above: u,
//! clear: u }`). Level-triggered (the seed's callbacks, the default in the
//! tables): a callback every measurement interval while the ratio is beyond
//! the level; edge-triggered: one per crossing.

use super::app::{encode_message, MessageHeader};
use super::node::App;
use braid_core::transport::{
    AdaptAction, AdaptCond, AdaptReport, AdaptWhen, Condition, Connection, Event, Ratio,
    Reliability, SendOptions, StreamId,
};
use braid_core::{Duration, Instant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The one stream the frame application uses.
pub const FRAME_STREAM: StreamId = StreamId(0);
/// Bytes the greedy pattern keeps queued beyond the congestion window.
pub const GREEDY_SLACK: u64 = 16 * 1024;
/// Smallest message size the resolution adaptation goes down to.
pub const MIN_MESSAGE: usize = 64;

/// How the application produces messages.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// Frames at `fps`; frame `k` holds `packets[k % len]` messages.
    FixedRate {
        /// Frames per second.
        fps: u32,
        /// Messages per frame (from a trace); must not be empty.
        packets: Vec<u32>,
    },
    /// One message per frame, as fast as the transport takes them.
    Greedy,
}

/// What the application adapts on threshold events.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Adaptation {
    /// Nothing.
    None,
    /// Reliability marking (§3.3).
    Marking {
        /// Upper loss threshold (0.30 in the seed).
        upper: f64,
        /// Lower loss threshold (0.05).
        lower: f64,
    },
    /// Resolution (message size) (§3.4, §3.5).
    Resolution {
        /// Upper loss threshold (0.15).
        upper: f64,
        /// Lower loss threshold (0.01).
        lower: f64,
        /// Adapt only at frames whose number is divisible by this (1 =
        /// at once; 20 in §3.5).
        granularity: u64,
    },
}

/// Whether and how the application tells the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coordination {
    /// The seed's RUDP: no reports.
    Uncoordinated,
    /// IQ-RUDP: ADAPT reports with ADAPT_WHEN.
    Coordinated,
    /// IQ-RUDP with ADAPT_COND as well (§3.5 scheme 3).
    CoordinatedCond,
    /// An ablation, not in the seed: no reports, but unmarked messages go
    /// as `Discardable`, so only the transport's own congestion-triggered
    /// discarding acts on them.
    DiscardableOnly,
}

/// A [`FrameApp`]'s settings.
#[derive(Debug, Clone)]
pub struct FrameConfig {
    /// Seed of the marking coin and of the message bodies.
    pub seed: u64,
    /// Traffic pattern.
    pub pattern: Pattern,
    /// Messages to send in all.
    pub messages: u64,
    /// Initial (and largest) message size in bytes.
    pub message_size: usize,
    /// Adaptation.
    pub adaptation: Adaptation,
    /// Coordination.
    pub coordination: Coordination,
    /// Bytes the fixed-rate pattern may keep queued (unsent or unacked)
    /// before a frame must wait.
    pub queue_limit: u64,
    /// Level-triggered callbacks: one every measurement interval while a
    /// threshold holds (the seed's; braid-core's repeating conditions).
    /// `false`: one per crossing (edge-triggered).
    pub level_triggered: bool,
}

/// Most window changes a [`FrameApp`] records.
pub const MAX_BOOSTS: usize = 100_000;

/// A window change made by the transport right after a report (or at the
/// message an `AtMessage` report named).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowChange {
    /// When.
    pub at: Instant,
    /// Window before, bytes.
    pub before: u64,
    /// Window after, bytes.
    pub after: u64,
    /// For an increase: when the window was first seen back at or below
    /// `before` (a loss reduction ate the boost).
    pub undone_at: Option<Instant>,
}

/// A resolution change waiting for its frame (granularity > 1).
#[derive(Debug, Clone, Copy)]
struct PendingResize {
    new_size: f64,
    eratio: f64,
    rate_bps: u64,
}

/// Counters of what the application did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounters {
    /// Messages queued.
    pub messages: u64,
    /// Of which tagged.
    pub tagged: u64,
    /// Of which unmarked.
    pub unmarked: u64,
    /// Bytes queued.
    pub bytes: u64,
    /// Upper / lower callbacks received.
    pub upper_events: u64,
    /// Lower callbacks received.
    pub lower_events: u64,
    /// Adaptations carried out.
    pub adaptations: u64,
    /// ADAPT reports handed to the transport.
    pub reports: u64,
}

/// The adaptive frame application (see the module docs).
#[derive(Debug)]
pub struct FrameApp {
    cfg: FrameConfig,
    rng: ChaCha8Rng,
    registered: bool,
    frame: u64,
    /// Messages of the current frame still to queue.
    frame_left: u32,
    next_frame_at: Instant,
    /// A frame is due but the send queue is full.
    blocked: bool,
    size: f64,
    unmark_p: f64,
    pending: Option<PendingResize>,
    counters: FrameCounters,
    started_at: Option<Instant>,
    /// (time, size) after every resolution change.
    size_log: Vec<(Instant, u32)>,
    boosts: Vec<WindowChange>,
}

impl FrameApp {
    /// An application with `cfg`.
    pub fn new(cfg: FrameConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6672_616d_6573);
        let size = cfg.message_size as f64;
        FrameApp {
            rng,
            registered: false,
            frame: 0,
            frame_left: 0,
            next_frame_at: Instant::ZERO,
            blocked: false,
            size,
            unmark_p: 0.0,
            pending: None,
            counters: FrameCounters::default(),
            started_at: None,
            size_log: Vec::new(),
            boosts: Vec::new(),
            cfg,
        }
    }

    /// What the application did.
    pub fn counters(&self) -> FrameCounters {
        self.counters
    }

    /// When the connection was up and the first message queued.
    pub fn started_at(&self) -> Option<Instant> {
        self.started_at
    }

    /// True once every message has been queued.
    pub fn done(&self) -> bool {
        self.counters.messages >= self.cfg.messages
    }

    /// Every resolution change: (time, new size).
    pub fn size_log(&self) -> &[(Instant, u32)] {
        &self.size_log
    }

    fn coordinated(&self) -> bool {
        matches!(
            self.cfg.coordination,
            Coordination::Coordinated | Coordination::CoordinatedCond
        )
    }

    fn report(&mut self, now: Instant, conn: &mut Connection, r: AdaptReport) {
        if self.coordinated() {
            self.counters.reports += 1;
            let w0 = conn.window();
            conn.report_adaptation(r);
            self.note_window(now, w0, conn.window());
        }
    }

    /// Records a window change made by the transport's coordination.
    fn note_window(&mut self, now: Instant, before: u64, after: u64) {
        if before != after && self.boosts.len() < MAX_BOOSTS {
            self.boosts.push(WindowChange {
                at: now,
                before,
                after,
                undone_at: None,
            });
        }
    }

    /// Marks boosts whose window has fallen back to where it was.
    fn track_boosts(&mut self, now: Instant, window: u64) {
        for b in self.boosts.iter_mut().rev() {
            if b.undone_at.is_some() {
                break;
            }
            if b.after > b.before && window <= b.before {
                b.undone_at = Some(now);
            }
        }
    }

    /// Every window change the coordination made, in order.
    pub fn window_changes(&self) -> &[WindowChange] {
        &self.boosts
    }

    fn register(&mut self, conn: &mut Connection) {
        let (upper, lower) = match self.cfg.adaptation {
            Adaptation::None => return,
            Adaptation::Marking { upper, lower } => (upper, lower),
            Adaptation::Resolution { upper, lower, .. } => (upper, lower),
        };
        let above = Condition::LossAbove {
            above: upper,
            clear: upper,
        };
        let below = Condition::LossBelow {
            below: lower,
            clear: lower,
        };
        // Levels in [0, 1] with clear == trigger are always valid.
        for c in [above, below] {
            let _ = if self.cfg.level_triggered {
                conn.add_threshold_repeating(c)
            } else {
                conn.add_threshold(c)
            };
        }
    }

    fn on_threshold(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        upper: bool,
        eratio: f64,
        rate_bps: u64,
    ) {
        if upper {
            self.counters.upper_events += 1;
        } else {
            self.counters.lower_events += 1;
        }
        match self.cfg.adaptation {
            Adaptation::None => {}
            Adaptation::Marking { .. } => {
                self.unmark_p = if upper {
                    (1.25 * eratio).clamp(0.40, 1.0)
                } else {
                    self.unmark_p * 0.8
                };
                self.counters.adaptations += 1;
                // Untagged messages are 4 in 5: the unmarked share of all.
                let unmarked = Ratio::from_f64(self.unmark_p * 0.8);
                let cond = AdaptCond {
                    error_ratio: Ratio::from_f64(eratio),
                    rate_bps,
                };
                self.report(
                    now,
                    conn,
                    AdaptReport {
                        action: AdaptAction::Marking { unmarked },
                        when: AdaptWhen::Now,
                        cond: (self.cfg.coordination == Coordination::CoordinatedCond)
                            .then_some(cond),
                    },
                );
            }
            Adaptation::Resolution { granularity, .. } => {
                let max = self.cfg.message_size as f64;
                let base = self.pending.map_or(self.size, |p| p.new_size);
                let new_size = if upper {
                    (base * (1.0 - eratio.clamp(0.0, 0.9))).max(MIN_MESSAGE as f64)
                } else {
                    (base * 1.1).min(max)
                };
                if (new_size - base).abs() < 0.5 {
                    return;
                }
                let p = PendingResize {
                    new_size,
                    eratio,
                    rate_bps,
                };
                if granularity <= 1 {
                    self.apply_resize(now, conn, p, AdaptWhen::Now);
                } else {
                    if self.pending.is_none() {
                        self.report(
                            now,
                            conn,
                            AdaptReport {
                                action: AdaptAction::PacketSize {
                                    factor: factor(self.size, new_size),
                                },
                                when: AdaptWhen::Deferred,
                                cond: None,
                            },
                        );
                    }
                    self.pending = Some(p);
                }
            }
        }
    }

    fn apply_resize(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        p: PendingResize,
        when: AdaptWhen,
    ) {
        let old = self.size;
        self.size = p.new_size;
        self.counters.adaptations += 1;
        self.size_log.push((now, self.size as u32));
        let cond = (self.cfg.coordination == Coordination::CoordinatedCond).then_some(AdaptCond {
            error_ratio: Ratio::from_f64(p.eratio),
            rate_bps: p.rate_bps,
        });
        self.report(
            now,
            conn,
            AdaptReport {
                action: AdaptAction::PacketSize {
                    factor: factor(old, p.new_size),
                },
                when,
                cond,
            },
        );
    }

    fn class(&mut self, tagged: bool) -> Reliability {
        if tagged || self.unmark_p <= 0.0 {
            return Reliability::Reliable;
        }
        if self.rng.random::<f64>() < self.unmark_p {
            self.counters.unmarked += 1;
            if self.coordinated() || self.cfg.coordination == Coordination::DiscardableOnly {
                Reliability::Discardable
            } else {
                Reliability::Unreliable
            }
        } else {
            Reliability::Reliable
        }
    }

    /// Queues one message; false if the transport refused it.
    fn send_one(&mut self, now: Instant, conn: &mut Connection) -> bool {
        let number = self.counters.messages;
        let tagged = matches!(self.cfg.adaptation, Adaptation::Marking { .. }) && number % 5 == 0;
        let reliability = self.class(tagged);
        let h = MessageHeader {
            number,
            sent_at: now,
            deadline: None,
            tagged,
        };
        let data = encode_message(self.cfg.seed, FRAME_STREAM, &h, self.size.round() as usize);
        let len = data.len() as u64;
        let opts = SendOptions {
            reliability,
            ..SendOptions::RELIABLE
        };
        let w0 = conn.window();
        if conn.send(now, FRAME_STREAM, data, opts).is_err() {
            return false;
        }
        self.note_window(now, w0, conn.window());
        self.counters.messages += 1;
        self.counters.bytes += len;
        self.counters.tagged += u64::from(tagged);
        true
    }

    /// Starts frame `self.frame`: applies a pending resolution change if
    /// this frame may carry it.
    fn start_frame(&mut self, now: Instant, conn: &mut Connection) {
        if let (Some(p), Adaptation::Resolution { granularity, .. }) =
            (self.pending, self.cfg.adaptation)
        {
            if self.frame % granularity.max(1) == 0 {
                self.pending = None;
                let when = AdaptWhen::AtMessage {
                    stream: FRAME_STREAM,
                    message: self.counters.messages,
                };
                self.apply_resize(now, conn, p, when);
            }
        }
        self.frame_left = match &self.cfg.pattern {
            Pattern::FixedRate { packets, .. } => {
                let n = packets.len().max(1);
                packets
                    .get(self.frame as usize % n)
                    .copied()
                    .unwrap_or(1)
                    .max(1)
            }
            Pattern::Greedy => 1,
        };
    }

    fn produce(&mut self, now: Instant, conn: &mut Connection) {
        while !self.done() {
            if self.frame_left == 0 {
                let room = match self.cfg.pattern {
                    Pattern::FixedRate { fps, .. } => {
                        if now < self.next_frame_at {
                            return;
                        }
                        if conn.queued_bytes() >= self.cfg.queue_limit {
                            // Blocked: acknowledgements wake us, not the timer.
                            self.blocked = true;
                            return;
                        }
                        self.blocked = false;
                        let period = Duration::from_nanos(1_000_000_000 / u64::from(fps.max(1)));
                        self.next_frame_at = self.next_frame_at.max(now) + period;
                        true
                    }
                    Pattern::Greedy => conn.queued_bytes() < conn.window() + GREEDY_SLACK,
                };
                if !room {
                    return;
                }
                self.start_frame(now, conn);
                self.frame += 1;
            }
            if !self.send_one(now, conn) {
                return;
            }
            self.frame_left -= 1;
        }
    }
}

/// New size over old in parts per 10 000 (at least 1).
fn factor(old: f64, new: f64) -> u32 {
    ((new / old.max(1.0)) * 10_000.0)
        .round()
        .clamp(1.0, 1_000_000.0) as u32
}

impl App for FrameApp {
    fn drive(&mut self, now: Instant, conn: &mut Connection) {
        if !conn.is_established() {
            return;
        }
        if !self.registered {
            self.registered = true;
            self.register(conn);
            self.started_at = Some(now);
            self.next_frame_at = now;
        }
        self.track_boosts(now, conn.window());
        while let Some(e) = conn.poll_event() {
            if let Event::Threshold(t) = e {
                if !t.crossed {
                    continue;
                }
                let upper = matches!(t.condition, Condition::LossAbove { .. });
                self.on_threshold(now, conn, upper, t.loss_ratio, t.delivery_rate.bps());
            }
        }
        self.produce(now, conn);
    }

    fn next_wakeup(&self) -> Option<Instant> {
        match self.cfg.pattern {
            Pattern::FixedRate { .. }
                if self.registered && !self.done() && self.frame_left == 0 && !self.blocked =>
            {
                Some(self.next_frame_at)
            }
            _ => None,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("app_messages", c.messages),
            ("app_unmarked", c.unmarked),
            ("app_upper_events", c.upper_events),
            ("app_lower_events", c.lower_events),
            ("app_reports", c.reports),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_is_parts_per_ten_thousand() {
        assert_eq!(factor(1000.0, 800.0), 8000);
        assert_eq!(factor(1000.0, 1100.0), 11000);
        assert_eq!(factor(0.0, 5.0), 50000);
    }
}
