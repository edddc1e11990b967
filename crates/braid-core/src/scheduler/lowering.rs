//! Answering the upcall (seed 000 §V: the application is told what the
//! paths can carry and may accept less): [`BestAchievable::lowered`]
//! lowers a spec to what can be met, and [`UpcallPolicy`] is braid's one
//! rule for answering, used by `braid stream --on-infeasible`, the
//! simulator's sources and any application that wants a policy rather
//! than its own answer.

use super::mapping::BestAchievable;
use super::pgos::UpcallAnswer;
use super::spec::StreamSpec;
use crate::units::Bandwidth;

/// How an application answers the upcall raised when a stream's guarantee
/// cannot be met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum UpcallPolicy {
    /// Lower the spec to the best achievable figures
    /// ([`BestAchievable::lowered`]); best effort when nothing is left
    /// (the default).
    #[default]
    Lower,
    /// Run the stream best effort.
    Accept,
    /// Close the stream; the others go on.
    Drop,
    /// Give up: the application ends (its answer is none; see
    /// [`UpcallPolicy::answer`]).
    Fail,
}

impl UpcallPolicy {
    /// The answer to an upcall for a stream that asked for `spec` when the
    /// paths can give `best`; `None` under [`UpcallPolicy::Fail`], where
    /// the application is to stop rather than answer.
    pub fn answer(self, spec: &StreamSpec, best: &BestAchievable) -> Option<UpcallAnswer> {
        match self {
            UpcallPolicy::Lower => Some(
                best.lowered(spec)
                    .map_or(UpcallAnswer::Accept, UpcallAnswer::Lower),
            ),
            UpcallPolicy::Accept => Some(UpcallAnswer::Accept),
            UpcallPolicy::Drop => Some(UpcallAnswer::Close),
            UpcallPolicy::Fail => None,
        }
    }

    /// `lower`, `accept`, `drop` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            UpcallPolicy::Lower => "lower",
            UpcallPolicy::Accept => "accept",
            UpcallPolicy::Drop => "drop",
            UpcallPolicy::Fail => "fail",
        }
    }
}

impl std::fmt::Display for UpcallPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for UpcallPolicy {
    type Err = String;
    /// `lower`, `accept` (or `best-effort`), `drop` or `fail`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "lower" => Ok(UpcallPolicy::Lower),
            "accept" | "best-effort" => Ok(UpcallPolicy::Accept),
            "drop" => Ok(UpcallPolicy::Drop),
            "fail" => Ok(UpcallPolicy::Fail),
            other => Err(format!(
                "unknown answer `{other}` (lower, accept, drop or fail)"
            )),
        }
    }
}

impl BestAchievable {
    /// The spec these figures allow in place of `spec`: a rate spec at the
    /// best rate with its probability; a window spec with the `x` of `y`
    /// that the best rate carries (Lemma 1); a violation bound at the best
    /// E\[Z\]. `None` when nothing is left but best effort.
    pub fn lowered(&self, spec: &StreamSpec) -> Option<StreamSpec> {
        let rate = self.rate;
        match *spec {
            StreamSpec::MinRate { probability, .. } if rate > Bandwidth::ZERO => {
                StreamSpec::min_rate(rate, probability).ok()
            }
            StreamSpec::Window {
                y,
                window,
                message_size,
                probability,
                ..
            } => {
                // Lemma 1: x messages of s bytes per t_w is x·s·8/t_w.
                let per_window = rate.bytes_in(window) / u64::from(message_size.max(1));
                let x = u32::try_from(per_window).unwrap_or(u32::MAX).min(y);
                StreamSpec::window(x, y, window, message_size, probability).ok()
            }
            StreamSpec::ViolationBound {
                x,
                window,
                message_size,
                ..
            } => self
                .expected_misses
                .and_then(|z| StreamSpec::violation_bound(x, window, message_size, z).ok()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    #[test]
    fn lowering_follows_the_best_achievable_figures() {
        let best = BestAchievable {
            rate: Bandwidth::from_mbps(2),
            probability: Some(0.5),
            expected_misses: Some(1.5),
        };
        let rate = StreamSpec::min_rate(Bandwidth::from_mbps(5), 0.95).unwrap();
        assert_eq!(
            best.lowered(&rate),
            Some(StreamSpec::min_rate(Bandwidth::from_mbps(2), 0.95).unwrap())
        );
        // 2 Mbit/s over 100 ms = 25,000 B = 20 messages of 1250 B (of 30).
        let window = StreamSpec::window(25, 30, Duration::from_millis(100), 1250, 0.99).unwrap();
        assert_eq!(
            best.lowered(&window),
            Some(StreamSpec::window(20, 30, Duration::from_millis(100), 1250, 0.99).unwrap())
        );
        let vb = StreamSpec::violation_bound(8, Duration::from_millis(100), 1000, 0.5).unwrap();
        assert_eq!(
            best.lowered(&vb),
            Some(StreamSpec::violation_bound(8, Duration::from_millis(100), 1000, 1.5).unwrap())
        );
        let nothing = BestAchievable::default();
        assert_eq!(nothing.lowered(&rate), None);
        assert_eq!(nothing.lowered(&window), None);
    }
}
