//! Plain-text tables of a [`Report`].

use super::Report;
use std::fmt::Write;

/// braid's one plain-text table layout: the first `left` columns
/// left-aligned, the rest right-aligned, two spaces between, trailing
/// spaces trimmed.
pub fn grid(rows: &[Vec<String>], left: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            if c < left {
                let _ = write!(line, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(line, "{cell:>w$}", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn f3(x: f64) -> String {
    format!("{x:.3}")
}

pub(super) fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario {}: {} s simulated", r.scenario, r.duration_s);
    let _ = writeln!(out, "seed {} (replay with {})", r.seed, r.replay);
    out.push('\n');
    if r.flows.is_empty() {
        out.push_str("no flows\n");
    } else {
        let mut rows = vec![vec![
            "flow",
            "kind",
            "route",
            "Mbit/s mean",
            "p5",
            "p50",
            "p95",
            "delay ms mean",
            "p95",
            "max",
            "loss %",
            "sent",
            "lost",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()];
        for f in &r.flows {
            let t = &f.throughput_mbps;
            let d = &f.delay_ms;
            rows.push(vec![
                f.name.clone(),
                f.kind.clone(),
                f.route.clone(),
                f3(t.mean),
                f3(t.p5),
                f3(t.p50),
                f3(t.p95),
                f3(d.mean),
                f3(d.p95),
                f3(d.max),
                format!("{:.3}", f.loss * 100.0),
                f.sent_packets.to_string(),
                f.lost_packets.to_string(),
            ]);
        }
        out.push_str("flows (throughput over 1 s windows; one-way delay)\n");
        out.push_str(&grid(&rows, 3));
    }
    out.push('\n');
    let mut rows = vec![vec![
        "link",
        "",
        "",
        "capacity Mbit/s",
        "delivered Mbit/s",
        "util %",
        "queue drops",
        "random loss",
        "dup",
        "reord",
        "max queue B",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>()];
    for l in &r.links {
        rows.push(vec![
            l.name.clone(),
            String::new(),
            String::new(),
            f3(l.capacity_mbps),
            f3(l.delivered_mbps),
            format!("{:.1}", l.utilization * 100.0),
            l.stats.queue_drops.to_string(),
            l.stats.random_losses.to_string(),
            l.stats.duplicates.to_string(),
            l.stats.reordered.to_string(),
            l.stats.max_queue_bytes.to_string(),
        ]);
    }
    out.push_str("links\n");
    out.push_str(&grid(&rows, 3));
    if r.sim.refused_events > 0 {
        let _ = writeln!(
            out,
            "\nwarning: {} events were refused because the event queue was full; results are incomplete",
            r.sim.refused_events
        );
    }
    if r.sim.unroutable > 0 {
        let _ = writeln!(
            out,
            "\nnote: {} datagrams were sent on an unknown route or one with no receiver",
            r.sim.unroutable
        );
    }
    out
}
