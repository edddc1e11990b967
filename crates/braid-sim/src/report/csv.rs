//! CSV time series of a [`Report`] (one row per bin and flow or link).

use super::Report;
use std::fmt::Write;

pub(super) fn flows(r: &Report) -> String {
    let mut out = String::from("time_s,flow,throughput_mbps,delay_mean_ms,lost_packets\n");
    for i in 0..r.bins() {
        let t = i as f64 * r.bin_s;
        for f in &r.flows {
            let delay = f
                .series_delay_ms
                .get(i)
                .copied()
                .flatten()
                .map(|d| d.to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{},{},{}",
                super::r4(t),
                f.name,
                f.series_mbps.get(i).copied().unwrap_or(0.0),
                delay,
                f.series_lost.get(i).copied().unwrap_or(0)
            );
        }
    }
    out
}

pub(super) fn links(r: &Report) -> String {
    let mut out = String::from("time_s,link,capacity_mbps,delivered_mbps,queue_max_bytes,drops\n");
    for i in 0..r.bins() {
        let t = i as f64 * r.bin_s;
        for l in &r.links {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{}",
                super::r4(t),
                l.name,
                l.series_capacity_mbps.get(i).copied().unwrap_or(0.0),
                l.series_delivered_mbps.get(i).copied().unwrap_or(0.0),
                l.series_queue_bytes.get(i).copied().unwrap_or(0),
                l.series_drops.get(i).copied().unwrap_or(0)
            );
        }
    }
    out
}
