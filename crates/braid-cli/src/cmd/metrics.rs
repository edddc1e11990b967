//! `--metrics ADDR`: Prometheus text format over HTTP, through the
//! `metrics` facade and `metrics-exporter-prometheus` (no hand-written
//! exposition).
//!
//! Main items: [`install`] (starts the scrape endpoint), [`record_session`]
//! (per-stream and per-path gauges and counters from a [`Snapshot`]),
//! [`record_relay`] (a relay's counters). The names and labels are listed
//! in docs/sessions.md ("Metrics"). Counters are set to the snapshot's
//! running totals (`absolute`), so a scrape sees the same figures as the
//! view.

use super::view::Names;
use anyhow::Context;
use braid_core::session::record::SnapshotRecord;
use braid_core::session::relay::RelayStats;
use braid_core::session::Snapshot;
use metrics::{counter, gauge};
use std::net::SocketAddr;

/// Serves the metrics at `http://ADDR/` (any path) from now on. Call
/// inside the tokio runtime: the listener runs on it.
///
/// # Errors
/// The exporter could not be installed (the address is taken, or a
/// recorder is installed already).
pub fn install(addr: SocketAddr) -> anyhow::Result<()> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .with_context(|| format!("serving metrics on {addr}"))
}

/// Sets the gauges and counters of every stream and path of `snap`, from
/// its record (the figures `--format json` prints).
pub fn record_session(snap: &Snapshot, names: &Names) {
    let r = SnapshotRecord::new(snap, &names.paths);
    for s in &r.streams {
        let l = [("stream", s.name.clone())];
        gauge!("braid_stream_rate_bps", &l).set(s.rate_bps as f64);
        if let Some(m) = s.windows_met {
            gauge!("braid_stream_windows_met_ratio", &l).set(m);
        }
        gauge!("braid_stream_unmet", &l).set(if s.unmet.is_some() { 1.0 } else { 0.0 });
        if let Some(best) = &s.unmet {
            gauge!("braid_stream_best_rate_bps", &l).set(best.best_rate_bps as f64);
        }
        let promised: u64 = s.paths.iter().map(|p| p.rate_bps).sum();
        gauge!("braid_stream_promised_bps", &l).set(promised as f64);
        counter!("braid_stream_messages_total", &l).absolute(s.messages);
        counter!("braid_stream_bytes_total", &l).absolute(s.bytes);
        counter!("braid_stream_lost_total", &l).absolute(s.lost);
        gauge!("braid_stream_finished", &l).set(if s.finished { 1.0 } else { 0.0 });
    }
    for p in &r.paths {
        let l = [("path", format!("p{}", p.id)), ("route", p.name.clone())];
        gauge!("braid_path_up", &l).set(if p.up { 1.0 } else { 0.0 });
        gauge!("braid_path_promised_bps", &l).set(p.promised_bps as f64);
        if let Some(g) = p.guaranteed_bps {
            gauge!("braid_path_guaranteed_bps", &l).set(g as f64);
        }
        gauge!("braid_path_delivered_bps", &l).set(p.delivered_bps as f64);
        gauge!("braid_path_rtt_seconds", &l).set(p.rtt_s);
        gauge!("braid_path_loss_ratio", &l).set(p.loss);
        counter!("braid_path_bytes_sent_total", &l).absolute(p.bytes_sent);
        counter!("braid_path_packets_lost_total", &l).absolute(p.packets_lost);
        for h in &p.hops {
            let hl = [("path", format!("p{}", p.id)), ("hop", h.index.to_string())];
            gauge!("braid_hop_rtt_seconds", &hl).set(h.rtt_s);
            gauge!("braid_hop_loss_ratio", &hl).set(h.loss);
            gauge!("braid_hop_delivered_bps", &hl).set(h.delivered_bps as f64);
            gauge!("braid_hop_queued_bytes", &hl).set(h.queued_bytes as f64);
        }
    }
    counter!("braid_session_resent_total").absolute(r.resent);
    counter!("braid_session_paths_down_total").absolute(r.paths_down);
}

/// Sets a relay's counters, and the number of sessions' paths it carries.
pub fn record_relay(stats: &RelayStats, pairs_now: usize) {
    gauge!("braid_relay_pairs").set(pairs_now as f64);
    counter!("braid_relay_pairs_total").absolute(stats.pairs);
    counter!("braid_relay_bytes_forwarded_total", "direction" => "down").absolute(stats.bytes_down);
    counter!("braid_relay_bytes_forwarded_total", "direction" => "up").absolute(stats.bytes_up);
    counter!("braid_relay_messages_forwarded_total", "direction" => "down")
        .absolute(stats.forwarded_down);
    counter!("braid_relay_messages_forwarded_total", "direction" => "up")
        .absolute(stats.forwarded_up);
    counter!("braid_relay_refused_total").absolute(stats.refused);
    counter!("braid_relay_dropped_total").absolute(stats.dropped);
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;

    #[test]
    fn a_snapshot_becomes_labelled_prometheus_series() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let names = Names::from_routes(&["direct", "via=127.0.0.1:7001"]);
        metrics::with_local_recorder(&recorder, || {
            record_session(&super::super::view::tests::snapshot(), &names);
            record_relay(
                &RelayStats {
                    bytes_down: 77,
                    ..RelayStats::default()
                },
                2,
            );
        });
        let text = handle.render();
        for line in [
            "braid_stream_rate_bps{stream=\"video\"} 3200000",
            "braid_stream_windows_met_ratio{stream=\"video\"} 0.99",
            "braid_stream_unmet{stream=\"stream-2\"} 1",
            "braid_stream_best_rate_bps{stream=\"stream-2\"} 2100000",
            "braid_path_up{path=\"p0\",route=\"direct\"} 1",
            "braid_path_up{path=\"p1\",route=\"via=127.0.0.1:7001\"} 0",
            "braid_path_rtt_seconds{path=\"p0\",route=\"direct\"} 0.042",
            "braid_path_delivered_bps{path=\"p0\",route=\"direct\"} 3200000",
            "braid_hop_queued_bytes{path=\"p1\",hop=\"1\"} 4096",
            "braid_relay_bytes_forwarded_total{direction=\"down\"} 77",
            "braid_relay_pairs 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing in\n{text}"
            );
        }
        assert!(text.contains("# TYPE braid_stream_bytes_total counter"));
    }
}
