//! Service classes on a premium resource: foreground and background
//! (seed 004 §4, "foreground media flows and background bulk transfers").
//!
//! A [`Class::Foreground`] reservation is guaranteed its rate. A
//! [`Class::Background`] reservation is admitted at its minimum rate `b_i`
//! (so the minimums are always guaranteed) and is given a proportional share
//! of the premium capacity that active foreground reservations leave unused,
//! seed 004 §4's formula for n bulk flows:
//!
//! ```text
//! U ≥ Σ b_j  (admission),      B_i = U · b_i / Σ b_j
//! ```
//!
//! Reading of the seed, said here because the extracted text is terse: `U`
//! is the premium capacity minus the active foreground rates, scaled by
//! [`DEFAULT_BACKGROUND_FRACTION`] (90 %), which is what the seed's own
//! figures show — "initially allocated 40.5 Mb/s Premium bandwidth: that is,
//! 90 percent of the 45 Mb/s" (Fig. 5) and "24.3 Mb/s … 90 percent of
//! 27 Mb/s" (Fig. 8). `U` is never taken below `Σ b_j`, so every
//! background holder gets at least its minimum. [`background_shares`] is the
//! one place the formula lives.

use crate::id::ReservationId;
use crate::units::Bandwidth;

/// The fraction of the unused premium capacity handed to background
/// holders, as in seed 004 Fig. 5 and Fig. 8 (40.5 of 45, 24.3 of 27 Mb/s).
pub const DEFAULT_BACKGROUND_FRACTION: f64 = 0.9;

/// How a reservation shares its resource.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A guaranteed rate (latency-sensitive flows, seed 004's foreground).
    #[default]
    Foreground,
    /// The reservation's rate is a guaranteed minimum; its holder is told a
    /// larger share whenever foreground leaves capacity unused (seed 004's
    /// background bulk transfers).
    Background,
}

/// Each background holder's share (seed 004 §4: `B_i = U · b_i / Σ b_j`).
///
/// `capacity` is the resource's premium capacity, `foreground` the sum of
/// the active foreground rates, `minimums` the active background holders
/// with their minimum rates, `fraction` the part of the unused capacity
/// handed out (clamped to `0..=1`). Returns the shares in the order of
/// `minimums`; each is at least the holder's minimum, and together they are
/// at most the capacity left by foreground or `Σ b_j`, whichever is larger.
pub fn background_shares(
    capacity: Bandwidth,
    foreground: Bandwidth,
    minimums: &[(ReservationId, Bandwidth)],
    fraction: f64,
) -> Vec<(ReservationId, Bandwidth)> {
    let sum: u128 = minimums.iter().map(|(_, b)| u128::from(b.bps())).sum();
    if sum == 0 {
        return minimums
            .iter()
            .map(|&(id, _)| (id, Bandwidth::ZERO))
            .collect();
    }
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let unused = capacity.saturating_sub(foreground).mul_f64(fraction);
    let u = u128::from(unused.bps()).max(sum);
    minimums
        .iter()
        .map(|&(id, b)| {
            // u · b / Σb ≤ u ≤ u64::MAX when b ≤ Σb, so the conversion holds;
            // saturate rather than trust it.
            let share = u * u128::from(b.bps()) / sum;
            (
                id,
                Bandwidth::from_bps(u64::try_from(share).unwrap_or(u64::MAX)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbit(m: u64) -> Bandwidth {
        Bandwidth::from_mbps(m)
    }
    fn kbit(k: u64) -> Bandwidth {
        Bandwidth::from_kbps(k)
    }

    #[test]
    fn seed_fig5_single_background_flow() {
        let one = [(ReservationId(1), mbit(1))];
        // 45 Mb/s premium, no foreground: 90 % = 40.5 Mb/s.
        assert_eq!(
            background_shares(mbit(45), Bandwidth::ZERO, &one, 0.9)[0].1,
            kbit(40_500)
        );
        // A 36 Mb/s foreground reservation arrives: 0.9 × 9 = 8.1 Mb/s.
        assert_eq!(
            background_shares(mbit(45), mbit(36), &one, 0.9)[0].1,
            kbit(8_100)
        );
    }

    #[test]
    fn proportional_to_minimums_and_never_below() {
        let two = [(ReservationId(1), mbit(10)), (ReservationId(2), mbit(30))];
        let s = background_shares(mbit(100), mbit(20), &two, 1.0);
        assert_eq!(
            s,
            vec![(ReservationId(1), mbit(20)), (ReservationId(2), mbit(60))]
        );
        // Foreground leaves less than Σb: each keeps its minimum.
        let s = background_shares(mbit(100), mbit(60), &two, 0.9);
        assert_eq!(
            s,
            vec![(ReservationId(1), mbit(10)), (ReservationId(2), mbit(30))]
        );
        assert!(background_shares(mbit(100), mbit(0), &[], 0.9).is_empty());
    }

    #[test]
    fn odd_fractions_are_clamped() {
        let one = [(ReservationId(1), mbit(1))];
        assert_eq!(
            background_shares(mbit(10), mbit(0), &one, 7.0)[0].1,
            mbit(10)
        );
        assert_eq!(
            background_shares(mbit(10), mbit(0), &one, f64::NAN)[0].1,
            mbit(10)
        );
        assert_eq!(
            background_shares(mbit(10), mbit(0), &one, -1.0)[0].1,
            mbit(1)
        );
    }
}
