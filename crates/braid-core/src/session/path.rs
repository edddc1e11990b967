//! One path of a session: its connection, what braid measured on it, and
//! whether it is alive.
//!
//! Main type: [`PathState`] (crate-internal) and the public snapshot
//! [`PathInfo`].
//!
//! Measurements come only from what the path's connection delivered: every
//! finished rate sample of the connection ([`Connection::poll_rate_sample`])
//! feeds the path's [`PathEstimate`] (app-limited samples are kept out
//! there), and the same interval gives one RTT sample (the connection's
//! smoothed RTT then) and one loss sample (the interval's loss ratio) for
//! the stream's RTT and loss bounds. Each history holds the estimator's
//! window of samples ([`SessionConfig::estimate_window`](super::SessionConfig)).
//! The scheduler's view also carries the path's packet loss
//! ([`PathState::packet_loss`]): lost over sent packets across the same
//! number of recent intervals, app-limited ones included (loss is measured
//! at whatever rate the path carries), combined with the relays' hops.
//!
//! Liveness (seed 000 §III; issue 10): a path is down when data has been in
//! flight for max(3 × SRTT, [`SessionConfig::down_min`](super::SessionConfig))
//! with no acknowledgement since it was sent or since the last
//! acknowledgement, whichever is later; it is up again once an
//! acknowledgement arrives after it went down.

use super::route::HopReport;
use crate::estimate::{PathEstimate, PromiseScale, RateSample};
use crate::id::PathId;
use crate::scheduler::PathView;
use crate::time::{Duration, Instant};
use crate::transport::{Connection, ConnectionHandle, FourTuple};
use crate::units::Bandwidth;
use std::collections::VecDeque;

/// What the application may read about a path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathInfo {
    /// The path.
    pub id: PathId,
    /// Its addresses.
    pub addr: FourTuple,
    /// Up (established and answering) or not.
    pub up: bool,
    /// Usable samples in its bandwidth estimate.
    pub samples: usize,
    /// Mean of the estimate, if any.
    pub mean: Option<Bandwidth>,
    /// Its smoothed RTT.
    pub srtt: Duration,
    /// The factor its promises are scaled by (1: the estimate as it is;
    /// lower after guarantees mapped here missed windows).
    pub promise_scale: f64,
}

#[derive(Debug)]
pub(crate) struct PathState {
    pub id: PathId,
    pub addr: FourTuple,
    pub conn: Option<ConnectionHandle>,
    /// The connection is established and has been greeted (source) or has
    /// greeted us (sink).
    pub established: bool,
    /// Down since this instant.
    pub down_since: Option<Instant>,
    /// Established at this instant (source: greeted).
    pub established_at: Option<Instant>,
    /// Named in `Event::PathUnmeasured` (warm-up no longer waits for it).
    pub unmeasured: bool,
    /// The scheduler knows this path.
    pub in_scheduler: bool,
    /// The view version ([`Self::view_version`]) the scheduler last saw.
    pub pushed_version: (u64, u64),
    pub estimate: PathEstimate,
    pub rtt_us: VecDeque<u64>,
    pub loss: VecDeque<f64>,
    /// (lost, acknowledged + lost) packets of each recent interval, and
    /// their sums: [`Self::packet_loss`].
    pub packets: VecDeque<(u64, u64)>,
    pub packets_sum: (u64, u64),
    /// The packet loss when it last moved by more than a tenth, and how
    /// often it did (each move pushes the scheduler's view again).
    pub pushed_loss: f64,
    pub loss_moves: u64,
    pub history: usize,
    pub srtt: Duration,
    /// Reconnect at this instant (its connection closed).
    pub reconnect_at: Option<Instant>,
    /// Source: where the path goes after its first hop (relays, then the
    /// sink); empty on a direct path.
    pub route: Vec<std::net::SocketAddr>,
    /// Source: the last report of each hop after the first (index − 1),
    /// with when it arrived.
    pub hops: Vec<Option<(HopReport, Instant)>>,
    /// Why its connection last closed, in words.
    pub last_error: Option<String>,
    /// Delivered bytes and loss of the last finished interval.
    pub last_rate: Bandwidth,
    pub last_loss: f64,
    /// Sum of the fresh hop reports' RTTs, and their combined loss.
    pub hops_srtt: Duration,
    pub hops_loss: f64,
    /// The last finished interval was app-limited (starts true).
    pub last_app_limited: bool,
    /// Probing until this instant; the next probe is due then.
    pub probe_until: Option<Instant>,
    pub next_probe: Option<Instant>,
    /// Rate promised to streams on this path (bit/s), and the token bucket
    /// (bytes, last refill) that holds unscheduled traffic to what the
    /// estimate leaves after it (`SessionConfig::cap_unscheduled`).
    pub promised_bps: u64,
    pub spare_tokens: f64,
    pub spare_at: Option<Instant>,
    /// The delay-based window of unscheduled traffic
    /// (`SessionConfig::bulk_yield`).
    pub bulk: super::bulk_yield::BulkYield,
    /// Source: the factor on this path's promises, corrected from the
    /// outcomes of the guarantees mapped onto it
    /// (`SessionConfig::calibration`), and how often it moved.
    pub scale: Option<PromiseScale>,
    pub scale_moves: u64,
    /// Source: the capacity-dip detector, and the factor a dip in
    /// progress scales the view by (1 otherwise; see `super::dip`).
    pub dip: super::dip::DipDetector,
    pub dip_factor: f64,
}

/// A hop report older than this no longer counts (its relay stopped
/// reporting; the path's liveness rule judges the rest).
pub(crate) const HOP_REPORT_MAX_AGE: Duration = Duration::from_secs(2);

impl PathState {
    /// Why the path's connection closed, in words; a "server full"
    /// refusal by its first hop, when that is a relay, says "relay full".
    pub fn close_words(&self, r: &crate::transport::CloseReason) -> String {
        use crate::transport::{CloseReason as C, REASON_SERVER_FULL_PREFIX as FULL};
        match r {
            C::Peer { reason, .. } if !self.route.is_empty() && reason.starts_with(FULL) => {
                format!(
                    "relay full: the relay at {} refused it ({reason})",
                    self.addr.remote
                )
            }
            _ => super::describe_close(r),
        }
    }

    pub fn new(
        id: PathId,
        addr: FourTuple,
        estimate: PathEstimate,
        history: usize,
        initial_rtt: Duration,
    ) -> Self {
        PathState {
            id,
            addr,
            conn: None,
            established: false,
            down_since: None,
            established_at: None,
            unmeasured: false,
            in_scheduler: false,
            pushed_version: (0, 0),
            estimate,
            rtt_us: VecDeque::with_capacity(history),
            loss: VecDeque::with_capacity(history),
            packets: VecDeque::with_capacity(history),
            packets_sum: (0, 0),
            pushed_loss: 0.0,
            loss_moves: 0,
            history,
            srtt: initial_rtt,
            reconnect_at: None,
            route: Vec::new(),
            hops: Vec::new(),
            last_error: None,
            last_rate: Bandwidth::ZERO,
            last_loss: 0.0,
            hops_srtt: Duration::ZERO,
            hops_loss: 0.0,
            last_app_limited: true,
            probe_until: None,
            next_probe: None,
            promised_bps: 0,
            spare_tokens: 0.0,
            spare_at: None,
            bulk: super::bulk_yield::BulkYield::new(super::bulk_yield::INITIAL_WINDOW),
            scale: None,
            scale_moves: 0,
            dip: super::dip::DipDetector::default(),
            dip_factor: 1.0,
        }
    }

    /// One window's outcome of a guarantee mapped onto this path at
    /// `probability` (see [`PromiseScale`]); moves the factor the
    /// scheduler's view is scaled by.
    pub fn handle_outcome(&mut self, probability: f64, missed: bool) {
        if let Some(s) = self.scale.as_mut() {
            let before = s.factor();
            s.handle_outcome(probability, missed);
            if s.factor() != before {
                self.scale_moves += 1;
            }
        }
    }

    /// One window's outcome of a violation bound mapped onto this path:
    /// `misses` of its `x` messages missed where `predicted` were (see
    /// [`PromiseScale::handle_misses`]).
    pub fn handle_misses(&mut self, misses: f64, predicted: f64, x: f64) {
        if let Some(s) = self.scale.as_mut() {
            let before = s.factor();
            s.handle_misses(misses, predicted, x);
            if s.factor() != before {
                self.scale_moves += 1;
            }
        }
    }

    /// The factor on this path's promises (1 without calibration).
    pub fn promise_scale(&self) -> f64 {
        self.scale.map_or(1.0, |s| s.factor())
    }

    /// Sets the factor a capacity dip scales the view by (1: no dip).
    pub fn set_dip_factor(&mut self, factor: f64) {
        let f = if factor.is_nan() {
            1.0
        } else {
            factor.clamp(1e-3, 1.0)
        };
        if f != self.dip_factor {
            self.dip_factor = f;
            self.scale_moves += 1;
        }
    }

    /// Changes whenever [`Self::view`] would: a new sample or a new factor.
    pub fn view_version(&self) -> (u64, u64) {
        (self.estimate.version(), self.scale_moves + self.loss_moves)
    }

    /// Takes a relay's report on a hop of this path (ignored unless the
    /// path is relayed and the index is one of its hops).
    pub fn handle_hop_report(&mut self, r: HopReport, now: Instant) {
        // A route of n addresses has n − 1 relays after the first, each
        // reporting with index 2..=n; the first relay reports index 1.
        let i = usize::from(r.index);
        if i == 0 || i > self.route.len() {
            return;
        }
        if self.hops.len() < i {
            self.hops.resize(i, None);
        }
        self.hops[i - 1] = Some((r, now));
        self.refresh_hops(now, HOP_REPORT_MAX_AGE);
    }

    /// Forgets hop reports older than `max_age` (a relay that stopped
    /// reporting) and re-adds the rest into `hops_srtt` and `hops_loss`.
    pub fn refresh_hops(&mut self, now: Instant, max_age: Duration) {
        let mut srtt = Duration::ZERO;
        let mut keep = 1.0;
        for slot in &mut self.hops {
            if slot.is_some_and(|(_, at)| now.saturating_duration_since(at) > max_age) {
                *slot = None;
            }
            if let Some((r, _)) = slot {
                srtt += r.srtt;
                keep *= 1.0 - r.loss;
            }
        }
        self.hops_srtt = srtt;
        self.hops_loss = (1.0 - keep).clamp(0.0, 1.0);
    }

    /// Smoothed RTT of the whole path: the first hop's plus the relays'.
    pub fn path_srtt(&self) -> Duration {
        self.srtt + self.hops_srtt
    }

    /// Loss of the whole path in the last interval: 1 − Π(1 − loss of each hop).
    pub fn path_loss(&self) -> f64 {
        (1.0 - (1.0 - self.last_loss) * (1.0 - self.hops_loss)).clamp(0.0, 1.0)
    }

    /// Usable now: established and not down.
    pub fn is_up(&self) -> bool {
        self.established && self.down_since.is_none()
    }

    /// Takes one finished interval of the connection.
    pub fn handle_sample(&mut self, s: RateSample, srtt: Duration) {
        self.srtt = srtt;
        self.last_rate = s.rate;
        self.last_loss = s.loss_ratio();
        self.last_app_limited = s.app_limited;
        self.estimate.handle_sample(s);
        self.count_packets(s.lost_packets, s.packets());
        if s.app_limited {
            return;
        }
        let rtt = self.path_srtt().as_micros();
        push_bounded(&mut self.rtt_us, rtt, self.history);
        push_bounded(&mut self.loss, s.loss_ratio(), self.history);
    }

    /// Adds one interval's packets to the loss history; a move of the
    /// loss by more than a tenth (or 10⁻⁵) since the scheduler last saw it
    /// makes the view new.
    fn count_packets(&mut self, lost: u64, total: u64) {
        if total == 0 {
            return;
        }
        if self.packets.len() >= self.history.max(1) {
            if let Some((l, t)) = self.packets.pop_front() {
                self.packets_sum.0 -= l;
                self.packets_sum.1 -= t;
            }
        }
        self.packets.push_back((lost, total));
        self.packets_sum.0 += lost;
        self.packets_sum.1 += total;
        let now = self.packet_loss();
        if (now - self.pushed_loss).abs() > (0.1 * self.pushed_loss).max(1e-5) {
            self.pushed_loss = now;
            self.loss_moves += 1;
        }
    }

    /// Lost over sent packets across the recent intervals, combined with
    /// the hops after the first (0 before any packet).
    pub fn packet_loss(&self) -> f64 {
        let (lost, total) = self.packets_sum;
        let own = if total == 0 {
            0.0
        } else {
            lost as f64 / total as f64
        };
        (1.0 - (1.0 - own) * (1.0 - self.hops_loss)).clamp(0.0, 1.0)
    }

    /// With guarantees on the path, whether unscheduled traffic may have
    /// another `bytes` now: refills the bucket at the estimate's
    /// `q`-quantile minus the promised rate (depth: 20 ms of it, at least
    /// one message). `true` when nothing is promised here or there is no
    /// estimate yet.
    pub fn spare_for(&mut self, now: Instant, bytes: u64, q: f64) -> bool {
        if self.promised_bps == 0 {
            return true;
        }
        let Some(q) = self.estimate.window().quantile(q) else {
            return true;
        };
        let rate = q.bps().saturating_sub(self.promised_bps) as f64 / 8.0;
        let depth = (rate * 0.02).max(bytes as f64);
        let dt = self
            .spare_at
            .map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
        self.spare_at = Some(now);
        self.spare_tokens = (self.spare_tokens + rate * dt).min(depth);
        self.spare_tokens >= bytes as f64
    }

    /// Takes `bytes` of unscheduled traffic out of the bucket.
    pub fn spend_spare(&mut self, bytes: u64) {
        if self.promised_bps > 0 {
            self.spare_tokens -= bytes as f64;
        }
    }

    /// The scheduler's view of the path: its estimate, scaled by the
    /// calibrated factor.
    pub fn view(&self) -> PathView {
        PathView::new(self.estimate.window().clone(), self.path_srtt())
            .with_loss(self.packet_loss())
            .scaled(self.promise_scale() * self.dip_factor)
    }

    pub fn samples(&self) -> usize {
        self.estimate.window().len()
    }

    /// Usable (not app-limited) samples the path has given since it
    /// started: what warm-up counts (a window at a longer time scale
    /// empties once, see `PathEstimate::with_scale`).
    pub fn usable_samples(&self) -> u64 {
        self.estimate.stats().samples_used
    }

    /// The `p`-quantile of the RTT history; `None` without samples.
    pub fn rtt_quantile(&self, p: f64) -> Option<Duration> {
        quantile_u64(&self.rtt_us, p).map(Duration::from_micros)
    }

    /// The one-way delay at `p`: the RTT history's `p`-quantile less half
    /// its smallest value (propagation one way plus the queue, which forms
    /// on the way out); `None` without samples.
    pub fn delay_quantile(&self, p: f64) -> Option<Duration> {
        let q = quantile_u64(&self.rtt_us, p)?;
        let min = self.rtt_us.iter().copied().min().unwrap_or(q);
        Some(Duration::from_micros(q.saturating_sub(min / 2)))
    }

    /// How long `bytes` queued at the source take to leave at the
    /// estimate's mean rate (zero without an estimate).
    pub fn drain_time(&self, bytes: u64) -> Duration {
        match self.estimate.window().mean() {
            Some(bps) if bps >= 1.0 => {
                Duration::from_secs_f64((bytes as f64 * 8.0 / bps).min(3600.0))
            }
            _ => Duration::ZERO,
        }
    }

    /// The `p`-quantile of the loss history; `None` without samples.
    pub fn loss_quantile(&self, p: f64) -> Option<f64> {
        let mut v: Vec<f64> = self.loss.iter().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        v.get(rank(p, v.len())).copied()
    }

    /// Whether the path has stopped answering (see the module docs).
    pub fn is_silent(&self, conn: &Connection, now: Instant, down_min: Duration) -> bool {
        self.silent_after(conn, down_min).is_some_and(|t| now > t)
    }

    /// The instant after which the path counts as silent if nothing is
    /// acknowledged before it (`None`: nothing in flight).
    pub fn silent_after(&self, conn: &Connection, down_min: Duration) -> Option<Instant> {
        let oldest = conn.oldest_unacked_sent_at()?;
        let since = conn.last_ack_at().map_or(oldest, |a| a.max(oldest));
        Some(since + self.srtt.saturating_mul(3).max(down_min))
    }

    /// Whether a down path answers again.
    pub fn answers_again(&self, conn: &Connection) -> bool {
        match (self.down_since, conn.last_ack_at()) {
            (Some(d), Some(a)) => a > d,
            _ => false,
        }
    }

    pub fn info(&self) -> PathInfo {
        PathInfo {
            id: self.id,
            addr: self.addr,
            up: self.is_up(),
            samples: self.samples(),
            mean: self
                .estimate
                .window()
                .mean()
                .map(|m| Bandwidth::from_bps(m as u64)),
            srtt: self.path_srtt(),
            promise_scale: self.promise_scale(),
        }
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T, bound: usize) {
    if q.len() >= bound.max(1) {
        q.pop_front();
    }
    q.push_back(v);
}

/// Index of the `p`-quantile in `n` sorted values: the smallest index whose
/// value is ≥ a share `p` of the values.
fn rank(p: f64, n: usize) -> usize {
    let k = (p.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    k.saturating_sub(1).min(n.saturating_sub(1))
}

fn quantile_u64(q: &VecDeque<u64>, p: f64) -> Option<u64> {
    if q.is_empty() {
        return None;
    }
    let mut v: Vec<u64> = q.iter().copied().collect();
    v.sort_unstable();
    v.get(rank(p, v.len())).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_rank_is_the_share_p_order_statistic() {
        assert_eq!(rank(0.95, 100), 94);
        assert_eq!(rank(1.0, 100), 99);
        assert_eq!(rank(0.0, 100), 0);
        assert_eq!(rank(0.5, 1), 0);
        let q: VecDeque<u64> = (1..=100).collect();
        assert_eq!(quantile_u64(&q, 0.95), Some(95));
    }
}
