//! Coordination of application and transport adaptation (seed 002 §2.3,
//! §3.3-3.5): the application reports how, when and under which assumed
//! network condition it adapted (ADAPT_FREQ / ADAPT_PKTSIZE / ADAPT_MARK /
//! ADAPT_WHEN / ADAPT_COND, carried as a [`AdaptFrame`]), and the
//! transport re-adjusts so the two layers do not over-react together.
//!
//! Main types: [`Coordinator`], [`CoordContext`], [`Readjust`].
//!
//! The rules:
//! - **Frequency** (ADAPT_FREQ): no window change — fewer messages of the
//!   same size already use the window as before (§3.4, last paragraph).
//! - **Resolution** (ADAPT_PKTSIZE) by `rate_chg` (new size = (1 −
//!   rate_chg) × old), when messages are smaller than a segment:
//!   `window ← window / (1 − rate_chg)` (§3.4). The same formula covers an
//!   increase (negative `rate_chg`, e.g. +10 % → window / 1.1).
//! - **Delayed resolution change with ADAPT_COND** (§3.5 scheme 3,
//!   formula (1)): the application adapted assuming error ratio `eratio`,
//!   the transport now measures `eratio_new`; then
//!   `window ← window · (1 − eratio_new) / ((1 − eratio) · (1 − rate_chg))`.
//!
//!   *How we read formula (1).* The extracted text shows a fraction whose
//!   numerator is `(1 − eratio_new)/(1 − eratio)` and whose denominator is
//!   `1/(1 − rate_chg)`. Taken literally that *shrinks* the window by
//!   `(1 − rate_chg)` when the network has not changed, contradicting
//!   scheme (2), which the paper says (3) only refines ("this modification
//!   to (2) usually only changes the behavior of the changing network
//!   test, since for the changing application test, eratio usually does not
//!   change"), and contradicting Table 8, where (3) gets the highest
//!   throughput. So we read the fraction bar as the layout of a product:
//!   the correction factor `(1 − eratio_new)/(1 − eratio)` times scheme
//!   (2)'s `1/(1 − rate_chg)`. With `eratio_new = eratio` it reduces to
//!   scheme (2); a network that got worse while the application waited
//!   (`eratio_new > eratio`) grows the window less, one that got better
//!   grows it more.
//! - **Marking** (ADAPT_MARK) with a non-zero unmarked fraction: queued
//!   unmarked (discardable) messages are discarded before they are sent,
//!   and later ones are dropped at the head of the queue, within the
//!   receiver's loss tolerance (§3.3); no window change. A zero fraction
//!   ends the discarding.
//! - **ADAPT_WHEN**: `Now` applies at once; `AtMessage` applies when the
//!   application queues that message of that stream (the seed's "next call
//!   to CMwritev_attr()"); `Deferred` changes nothing — the transport keeps
//!   adapting on its own until the real report arrives.
//!
//! braid's window counts bytes where IQ-RUDP's counted packets of one
//! message each. The factors are applied to the byte window unchanged:
//! their intent is to hand back to the transport the share of the rate
//! reduction the application already made, and that share is the same
//! fraction in either unit. The size condition ("messages smaller than a
//! segment") is kept as in the seed.
//!
//! Invariants: window factors are clamped to
//! `[MIN_WINDOW_SCALE, MAX_WINDOW_SCALE]`; at most [`MAX_PENDING_ADAPT`]
//! reports wait for their message; with coordination disabled (the
//! seed's uncoordinated "RUDP" baseline) reports change nothing.

use crate::wire::{AdaptAction, AdaptFrame, AdaptWhen, StreamId, RATIO_ONE};

/// Most reports waiting for an `AtMessage` point.
pub const MAX_PENDING_ADAPT: usize = 16;
/// Smallest window factor one report may apply.
pub const MIN_WINDOW_SCALE: f64 = 0.1;
/// Largest window factor one report may apply.
pub const MAX_WINDOW_SCALE: f64 = 10.0;
/// Largest error ratio used in formula (1), keeping `1 − eratio` away from 0.
pub const MAX_ERROR_RATIO: f64 = 0.99;

/// What the transport knows when it applies a report.
#[derive(Debug, Clone, Copy)]
pub struct CoordContext {
    /// The loss ratio the transport measures now (`eratio_new`).
    pub error_ratio: f64,
    /// The size of the application's current messages.
    pub message_size: u64,
    /// The largest stream payload one packet carries (the segment).
    pub segment_size: u64,
}

/// What the transport should do after a report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Readjust {
    /// Multiply the congestion window by this.
    pub window_scale: Option<f64>,
    /// Start (`true`) or stop (`false`) discarding unmarked messages.
    pub discard_unmarked: Option<bool>,
}

/// `1 / (1 − rate_chg)`: scheme (2)'s factor after a resolution change.
pub fn resolution_scale(rate_chg: f64) -> f64 {
    clamp_scale(1.0 / (1.0 - rate_chg))
}

/// Formula (1) as read above:
/// `(1 − eratio_new) / ((1 − eratio) · (1 − rate_chg))`.
pub fn delayed_scale(rate_chg: f64, eratio: f64, eratio_new: f64) -> f64 {
    let e = eratio.clamp(0.0, MAX_ERROR_RATIO);
    let n = eratio_new.clamp(0.0, MAX_ERROR_RATIO);
    clamp_scale((1.0 - n) / ((1.0 - e) * (1.0 - rate_chg)))
}

fn clamp_scale(f: f64) -> f64 {
    if f.is_finite() {
        f.clamp(MIN_WINDOW_SCALE, MAX_WINDOW_SCALE)
    } else {
        MAX_WINDOW_SCALE
    }
}

/// Applies the application's adaptation reports.
#[derive(Debug)]
pub struct Coordinator {
    enabled: bool,
    pending: Vec<AdaptFrame>,
    deferred: bool,
    applied: u64,
}

impl Coordinator {
    /// A coordinator; `enabled = false` gives the uncoordinated baseline.
    pub fn new(enabled: bool) -> Self {
        Coordinator {
            enabled,
            pending: Vec::new(),
            deferred: false,
            applied: 0,
        }
    }

    /// True if the application said it will adapt later and has not yet.
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// Reports applied so far.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Takes a report. Returns what to do now (nothing for `Deferred`, or
    /// for `AtMessage` until that message is queued).
    pub fn on_report(&mut self, r: AdaptFrame, ctx: &CoordContext) -> Readjust {
        if !self.enabled {
            return Readjust::default();
        }
        match r.when {
            AdaptWhen::Deferred => {
                self.deferred = true;
                Readjust::default()
            }
            AdaptWhen::AtMessage { .. } => {
                if self.pending.len() >= MAX_PENDING_ADAPT {
                    self.pending.remove(0);
                }
                self.pending.push(r);
                Readjust::default()
            }
            AdaptWhen::Now => self.apply(&r, ctx),
        }
    }

    /// The application queued message `number` of `stream`: applies the
    /// reports waiting for it (or an earlier one).
    pub fn on_enqueue(&mut self, stream: StreamId, number: u64, ctx: &CoordContext) -> Readjust {
        let mut out = Readjust::default();
        let mut i = 0;
        while i < self.pending.len() {
            let due = matches!(self.pending[i].when,
                AdaptWhen::AtMessage { stream: s, message } if s == stream && message <= number);
            if due {
                let r = self.pending.remove(i);
                let a = self.apply(&r, ctx);
                out.window_scale = match (out.window_scale, a.window_scale) {
                    (Some(x), Some(y)) => Some(clamp_scale(x * y)),
                    (x, y) => x.or(y),
                };
                out.discard_unmarked = a.discard_unmarked.or(out.discard_unmarked);
            } else {
                i += 1;
            }
        }
        out
    }

    fn apply(&mut self, r: &AdaptFrame, ctx: &CoordContext) -> Readjust {
        self.deferred = false;
        self.applied += 1;
        let one = f64::from(RATIO_ONE);
        match r.action {
            AdaptAction::Frequency { .. } | AdaptAction::LossTolerance { .. } => {
                Readjust::default()
            }
            AdaptAction::PacketSize { factor } => {
                if ctx.message_size >= ctx.segment_size {
                    return Readjust::default();
                }
                let rate_chg = 1.0 - f64::from(factor) / one;
                let scale = match r.cond {
                    Some(c) => delayed_scale(rate_chg, c.error_ratio.as_f64(), ctx.error_ratio),
                    None => resolution_scale(rate_chg),
                };
                Readjust {
                    window_scale: Some(scale),
                    discard_unmarked: None,
                }
            }
            AdaptAction::Marking { unmarked } => Readjust {
                window_scale: None,
                discard_unmarked: Some(unmarked.parts() > 0),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{AdaptCond, Ratio};

    fn ctx(err: f64, size: u64) -> CoordContext {
        CoordContext {
            error_ratio: err,
            message_size: size,
            segment_size: 1400,
        }
    }

    fn report(action: AdaptAction, when: AdaptWhen, cond: Option<f64>) -> AdaptFrame {
        AdaptFrame {
            action,
            when,
            cond: cond.map(|e| AdaptCond {
                error_ratio: Ratio::from_f64(e),
                rate_bps: 0,
            }),
        }
    }

    const SHRINK_20: AdaptAction = AdaptAction::PacketSize { factor: 8000 };

    #[test]
    fn resolution_reduction_grows_window_by_inverse() {
        let mut c = Coordinator::new(true);
        let r = c.on_report(report(SHRINK_20, AdaptWhen::Now, None), &ctx(0.2, 1000));
        assert!((r.window_scale.unwrap() - 1.25).abs() < 1e-9);
        // Messages of a segment or more: no change (seed's condition).
        let r = c.on_report(report(SHRINK_20, AdaptWhen::Now, None), &ctx(0.2, 1400));
        assert_eq!(r, Readjust::default());
        // A 10 % increase shrinks the window by 1/1.1.
        let grow = AdaptAction::PacketSize { factor: 11_000 };
        let r = c.on_report(report(grow, AdaptWhen::Now, None), &ctx(0.0, 1000));
        assert!((r.window_scale.unwrap() - 1.0 / 1.1).abs() < 1e-9);
    }

    #[test]
    fn frequency_change_leaves_window() {
        let mut c = Coordinator::new(true);
        let f = AdaptAction::Frequency { factor: 5000 };
        assert_eq!(
            c.on_report(report(f, AdaptWhen::Now, None), &ctx(0.2, 100)),
            Readjust::default()
        );
    }

    #[test]
    fn formula_one_corrects_for_changed_network() {
        // Unchanged network: same as scheme (2).
        assert!((delayed_scale(0.2, 0.2, 0.2) - 1.25).abs() < 1e-9);
        // Network worse (0.2 → 0.3): 0.7 / (0.8 · 0.8) = 1.09375.
        assert!((delayed_scale(0.2, 0.2, 0.3) - 1.093_75).abs() < 1e-9);
        // Network better (0.2 → 0.05): 0.95 / 0.64.
        assert!((delayed_scale(0.2, 0.2, 0.05) - 0.95 / 0.64).abs() < 1e-9);
        let mut c = Coordinator::new(true);
        let r = c.on_report(
            report(SHRINK_20, AdaptWhen::Now, Some(0.2)),
            &ctx(0.3, 1000),
        );
        assert!((r.window_scale.unwrap() - 1.093_75).abs() < 1e-4);
        // Extreme inputs stay bounded.
        assert_eq!(delayed_scale(0.999_999, 0.0, 0.0), MAX_WINDOW_SCALE);
        assert_eq!(delayed_scale(0.0, 0.0, 1.0), MIN_WINDOW_SCALE);
    }

    #[test]
    fn at_message_waits_for_that_message() {
        let mut c = Coordinator::new(true);
        let when = AdaptWhen::AtMessage {
            stream: StreamId(1),
            message: 20,
        };
        assert_eq!(
            c.on_report(report(SHRINK_20, when, None), &ctx(0.2, 1000)),
            Readjust::default()
        );
        assert_eq!(
            c.on_enqueue(StreamId(1), 19, &ctx(0.2, 1000)),
            Readjust::default()
        );
        assert_eq!(
            c.on_enqueue(StreamId(2), 25, &ctx(0.2, 1000)),
            Readjust::default()
        );
        let r = c.on_enqueue(StreamId(1), 20, &ctx(0.2, 1000));
        assert!((r.window_scale.unwrap() - 1.25).abs() < 1e-9);
        assert_eq!(
            c.on_enqueue(StreamId(1), 21, &ctx(0.2, 1000)),
            Readjust::default()
        );
    }

    #[test]
    fn deferred_and_marking_and_disabled() {
        let mut c = Coordinator::new(true);
        c.on_report(report(SHRINK_20, AdaptWhen::Deferred, None), &ctx(0.2, 10));
        assert!(c.is_deferred());
        let m = AdaptAction::Marking {
            unmarked: Ratio::from_f64(0.4),
        };
        let r = c.on_report(report(m, AdaptWhen::Now, None), &ctx(0.2, 10));
        assert_eq!(r.discard_unmarked, Some(true));
        assert_eq!(r.window_scale, None);
        assert!(!c.is_deferred());
        let mut off = Coordinator::new(false);
        assert_eq!(
            off.on_report(report(SHRINK_20, AdaptWhen::Now, None), &ctx(0.2, 10)),
            Readjust::default()
        );
    }
}
