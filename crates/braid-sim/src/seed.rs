//! Seeds: one scenario seed, many independent deterministic streams.
//!
//! Every random element (a link's impairments, a synthetic capacity, a
//! source) gets its own `ChaCha8Rng`, seeded from the scenario seed and a
//! label such as `"link:bottleneck"`. Adding or renaming one element
//! therefore leaves the others' random streams unchanged. The environment
//! variable [`SEED_ENV`] overrides a scenario's seed so that a printed seed
//! can be replayed.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The environment variable that overrides a scenario's seed.
pub const SEED_ENV: &str = "BRAID_SIM_SEED";

/// The seed to use: an explicit one (e.g. `--seed`) first, then the
/// environment's value, then the scenario's.
///
/// # Errors
/// The environment's value is set but not an unsigned integer.
pub fn resolve_seed(
    explicit: Option<u64>,
    env: Option<&str>,
    scenario: u64,
) -> Result<u64, String> {
    if let Some(s) = explicit {
        return Ok(s);
    }
    match env {
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{SEED_ENV}={v:?} is not an unsigned integer")),
        None => Ok(scenario),
    }
}

/// A sub-seed for `label` (FNV-1a of the label mixed into the seed with
/// splitmix64).
pub fn sub_seed(seed: u64, label: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    splitmix64(seed ^ h)
}

/// The generator for `label` under `seed`.
pub fn rng_for(seed: u64, label: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(sub_seed(seed, label))
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 32-byte endpoint secret drawn from the run's seed (one named stream
/// per `label`, so every endpoint of a run has its own).
pub fn secret(seed: u64, label: &str) -> [u8; 32] {
    use rand::RngCore;
    let mut s = [0u8; 32];
    rng_for(seed, label).fill_bytes(&mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        assert_eq!(resolve_seed(Some(3), Some("4"), 5), Ok(3));
        assert_eq!(resolve_seed(None, Some("4"), 5), Ok(4));
        assert_eq!(resolve_seed(None, None, 5), Ok(5));
        assert!(resolve_seed(None, Some("x"), 5).is_err());
        assert_ne!(sub_seed(1, "link:a"), sub_seed(1, "link:b"));
        assert_ne!(sub_seed(1, "link:a"), sub_seed(2, "link:a"));
    }
}
