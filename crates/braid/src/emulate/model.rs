//! One direction's link model as a user describes it (rate or trace,
//! delay, loss, queue bound), the flags' value syntax, and the control
//! language that changes a running link (`rate 40mbit`, `back-loss 1%`).
//!
//! Main items: [`LinkModel`] (→ a [`LinkConfig`] for the model, and a
//! one-line description), [`QueueBound`] (`150KB` or `100ms`),
//! [`parse_loss`], [`apply_control`] (one control line onto both
//! directions' models).

use super::{Direction, Emulator};
use braid_core::link::{Capacity, LinkConfig};
use braid_core::{Bandwidth, ByteSize, Duration};
use std::path::Path;

/// A queue bound as given: bytes, or time at the mean rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueBound {
    /// Bytes.
    Bytes(u64),
    /// Time at the mean rate.
    Time(Duration),
}

impl std::str::FromStr for QueueBound {
    type Err = String;
    /// A size (`150KB`, `64KiB`, at least one 1500-byte packet) or a time
    /// (`100ms`, above zero).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(d) = s.parse::<Duration>() {
            if d.is_zero() {
                return Err("a queue of zero time holds nothing (use e.g. 50ms)".into());
            }
            return Ok(QueueBound::Time(d));
        }
        match s.parse::<ByteSize>() {
            Ok(b) if b.bytes() >= 1500 => Ok(QueueBound::Bytes(b.bytes())),
            Ok(_) => Err(format!("queue {s} is smaller than one 1500-byte packet")),
            Err(_) => Err(format!(
                "{s:?} is neither a size (150KB, 64KiB) nor a time (100ms)"
            )),
        }
    }
}

/// Parses a loss probability: `0.1%` or `0.001`, at least 0 and below 1.
///
/// # Errors
/// Not a number, or out of range, as one line.
pub fn parse_loss(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (s, 1.0),
    };
    let p = num
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?} is not a probability (use 0.1% or 0.001)"))?
        / scale;
    if !(0.0..1.0).contains(&p) {
        return Err(format!("loss {s} must be at least 0 and below 100%"));
    }
    Ok(p)
}

/// One direction of the emulated link, as a user describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkModel {
    /// Constant rate or a trace's schedule.
    pub capacity: Capacity,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Random loss probability.
    pub loss: f64,
    /// Queue bound.
    pub queue: QueueBound,
}

impl LinkModel {
    /// The model's configuration for the link named `name`, its queue at
    /// least one `mtu`.
    pub fn link(&self, name: &str, mtu: u32) -> LinkConfig {
        let mut cfg = LinkConfig::new(name, self.capacity.clone(), self.delay);
        cfg.loss = self.loss;
        cfg.queue_bytes = match self.queue {
            QueueBound::Bytes(b) => b,
            QueueBound::Time(d) => self.capacity.mean().bytes_in(d),
        }
        .max(mtu as u64);
        cfg
    }

    /// `20 Mbit/s, delay 30ms, loss 0.1%, queue 75000 B` (`cfg` is
    /// [`LinkModel::link`]'s result, for the queue in bytes).
    pub fn describe(&self, cfg: &LinkConfig) -> String {
        let rate = match &self.capacity {
            Capacity::Constant(r) => format!("{r}"),
            Capacity::Schedule(s) => format!(
                "trace (mean {}, {} bins of {})",
                self.capacity.mean(),
                s.rates().len(),
                s.bin()
            ),
        };
        format!(
            "{rate}, delay {}, loss {}%, queue {} B",
            self.delay,
            self.loss * 100.0,
            cfg.queue_bytes
        )
    }
}

/// Applies one control line (`KEY VALUE`: `rate`, `trace`, `delay`,
/// `loss`, `queue`, each also as `back-KEY` for B→A only) to the models
/// (A→B, B→A) and the running emulator; says what changed. `trace`
/// reads its file through `load_trace` (path → capacity).
///
/// # Errors
/// A line that is not `KEY VALUE`, an unknown key, a bad value; nothing
/// is changed then.
pub fn apply_control(
    line: &str,
    models: &mut [LinkModel; 2],
    emu: &Emulator,
    mtu: u32,
    load_trace: &dyn Fn(&Path) -> Result<Capacity, String>,
) -> Result<String, String> {
    let (key, value) = line
        .split_once(char::is_whitespace)
        .map(|(k, v)| (k.trim(), v.trim()))
        .ok_or("expected `KEY VALUE` (e.g. `rate 40mbit`)")?;
    let (back_only, key) = match key.strip_prefix("back-") {
        Some(k) => (true, k),
        None => (false, key),
    };
    let dirs: &[usize] = if back_only { &[1] } else { &[0, 1] };
    // Parse once, then change every direction it names (all or nothing).
    let mut next = models.clone();
    for &d in dirs {
        let s = &mut next[d];
        match key {
            "rate" => {
                let r: Bandwidth = value.parse().map_err(|e| format!("{e}"))?;
                if r == Bandwidth::ZERO {
                    return Err("the rate must be positive".into());
                }
                s.capacity = Capacity::Constant(r);
            }
            "trace" => s.capacity = load_trace(Path::new(value))?,
            "delay" => s.delay = value.parse().map_err(|e| format!("{e}"))?,
            "loss" => s.loss = parse_loss(value)?,
            "queue" => s.queue = value.parse()?,
            _ => {
                return Err(format!(
                    "unknown key {key:?} (rate, trace, delay, loss, queue, and back-* of each)"
                ))
            }
        }
    }
    *models = next;
    let specs = models;
    let mut out = Vec::new();
    for &d in dirs {
        let (dir, name) = if d == 0 {
            (Direction::AtoB, "a>b")
        } else {
            (Direction::BtoA, "b>a")
        };
        let cfg = specs[d].link(name, mtu);
        out.push(format!("{name} now {}", specs[d].describe(&cfg)));
        emu.set_link(dir, cfg);
    }
    Ok(out.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_loss_and_queue() {
        assert_eq!(parse_loss("0.1%").unwrap(), 0.001);
        assert_eq!(parse_loss("0.02").unwrap(), 0.02);
        assert!(parse_loss("100%").is_err());
        assert!(parse_loss("-1").is_err());
        assert!(parse_loss("x").is_err());
        assert_eq!(
            "100ms".parse::<QueueBound>().unwrap(),
            QueueBound::Time(Duration::from_millis(100))
        );
        assert_eq!(
            "150KB".parse::<QueueBound>().unwrap(),
            QueueBound::Bytes(150_000)
        );
        assert!("100".parse::<QueueBound>().is_err());
        assert!("0ms".parse::<QueueBound>().is_err());
        assert!("lots".parse::<QueueBound>().is_err());
    }

    #[test]
    fn a_model_becomes_a_link_with_its_queue_in_bytes() {
        let m = LinkModel {
            capacity: Capacity::Constant(Bandwidth::from_mbps(8)),
            delay: Duration::from_millis(20),
            loss: 0.01,
            queue: QueueBound::Time(Duration::from_millis(100)),
        };
        let cfg = m.link("a>b", 1500);
        // 8 Mbit/s for 100 ms is 100 kB.
        assert_eq!(cfg.queue_bytes, 100_000);
        assert_eq!(
            m.describe(&cfg),
            "8 Mbit/s, delay 20ms, loss 1%, queue 100000 B"
        );
    }
}
