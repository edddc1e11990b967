//! The RUDP side of `braid perf`: the server's handling of one test
//! ([`serve`]) and the client ([`client`]). The exchange is in the
//! [parent module](super).

use super::arrivals::{read_stamp, stamp_ns, write_stamp};
use super::{
    cpu_us, wait_due, ClientOptions, Counter, PerfError, Progress, Report, Sample, Served, Summary,
    AUTOTUNE_CWNDS, FINAL_WAIT, GRACE, REPORT_EVERY, SEND_QUEUE_BYTES,
};
use crate::clock;
use crate::rudp::{Connection, Endpoint, EndpointConfig, ErrorCode, SendOptions, Stats};
use braid_core::{Duration, Instant};
use std::net::SocketAddr;

/// The longest the client waits out its connection's closing period
/// (its CLOSE leaves at the start of it) before it returns.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves one RUDP test on an accepted connection: counts what arrives on
/// stream 0, reports every [`REPORT_EVERY`], and after the client's END
/// sends the final report. Returns it with the messages the receiving core
/// dropped and the per-message statistics.
///
/// # Errors
/// [`PerfError`] if the connection closes before the end of the test.
pub async fn serve(mut c: Connection) -> Result<Served, PerfError> {
    let reports = c.open_stream(SendOptions::RELIABLE)?;
    let mut count = Counter::new();
    let mut tick = tokio::time::interval(REPORT_EVERY);
    // Messages the client says it sent, once its END arrived.
    let mut expected: Option<u64> = None;
    let mut quiet_since: Option<Instant> = None;
    loop {
        tokio::select! {
            m = c.recv() => {
                let Some(m) = m else {
                    return Err(PerfError::Protocol("connection closed before the end of the test".into()));
                };
                if m.stream.0 == 0 {
                    count.add_bytes(m.data.len());
                    count.add_message(read_stamp(&m.data));
                    quiet_since = Some(clock::now());
                } else if let Some(n) = m.data.strip_prefix(b"END").and_then(|b| b.try_into().ok()) {
                    expected = Some(u64::from_be_bytes(n));
                    quiet_since = Some(clock::now());
                }
            }
            // Reports once the test has begun: a connection that never
            // sends costs no report every 100 ms (a thousand idle ones
            // took a whole core).
            _ = tick.tick(), if quiet_since.is_some() => {
                let _ = reports.try_send(count.report(false).encode().to_vec());
            }
        }
        if let Some(n) = expected {
            let quiet = quiet_since.is_some_and(|q| {
                clock::now().saturating_duration_since(q) >= Duration::from(GRACE)
            });
            if count.messages >= n || quiet {
                let r = count.report(true);
                reports.send(r.encode().to_vec()).await?;
                let drops = c
                    .stats()
                    .await
                    .ok()
                    .map(|s| s.classes.map(|k| k.dropped_on_receive + k.late + k.expired));
                // The client closes once it has the final report.
                let _ =
                    tokio::time::timeout(FINAL_WAIT, async { while c.recv().await.is_some() {} })
                        .await;
                return Ok(Served {
                    report: r,
                    drops,
                    arrivals: count.arrivals.summary(),
                });
            }
        }
    }
}

fn sample(s: &Stats, prev: &Stats) -> Sample {
    let sent = s.packets_sent.saturating_sub(prev.packets_sent);
    let lost = s.packets_lost.saturating_sub(prev.packets_lost);
    Sample {
        rtt_ms: s.srtt.as_secs_f64() * 1e3,
        loss_pct: if sent > 0 {
            100.0 * lost as f64 / sent as f64
        } else {
            0.0
        },
        cwnd: s.cwnd,
        retrans: s
            .retransmitted_bytes
            .saturating_sub(prev.retransmitted_bytes),
    }
}

/// The client's endpoint settings for `o`.
fn endpoint_config(o: &ClientOptions) -> EndpointConfig {
    let mut cfg = EndpointConfig::default();
    cfg.transport.pacing = o.pacing;
    // A backlog of a few milliseconds at loopback rates, not seconds at
    // WAN rates: the test ends soon after the duration.
    cfg.transport.send_queue_bytes = SEND_QUEUE_BYTES;
    cfg.transport.congestion = o.congestion;
    cfg.transport.psk = o.key.clone();
    cfg.transport.protection = o.protection;
    if o.autotune {
        cfg.transport.send_queue_cwnds = AUTOTUNE_CWNDS;
        cfg.send_queue_messages = 1;
    }
    cfg
}

/// The largest message the RUDP client may send.
pub fn max_message_size() -> u64 {
    EndpointConfig::default().transport.max_message_size
}

/// Runs one RUDP test against the perf server at `to`, telling `progress`
/// as it goes; returns what it measured once the final report arrived.
///
/// # Errors
/// [`PerfError`] if the socket cannot be opened, the handshake fails, or
/// the server goes away before its final report.
pub async fn client(
    o: &ClientOptions,
    to: SocketAddr,
    progress: &mut dyn Progress,
) -> Result<Summary, PerfError> {
    let local: SocketAddr = if to.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let ep = Endpoint::bind(local, endpoint_config(o))
        .map_err(PerfError::rudp("opening a UDP socket"))?;
    let mut conn = ep
        .connect(to)
        .await
        .map_err(PerfError::rudp(format!("connecting to {to}")))?;
    let data = conn.open_stream(SendOptions {
        reliability: o.reliability,
        ..SendOptions::RELIABLE
    })?;
    let control = conn.open_stream(SendOptions::RELIABLE)?;
    let cpu0 = cpu_us();
    let opts = o.clone();
    let sender = tokio::spawn(async move {
        let template = vec![0x5a_u8; opts.max_size() as usize];
        let start = clock::now();
        let end = start + opts.duration;
        let (mut bytes, mut n) = (0u64, 0u64);
        loop {
            wait_due(&opts, start, end, n, bytes).await;
            if clock::now() >= end {
                break;
            }
            let size = opts.size_of(n);
            let mut msg = template[..size as usize].to_vec();
            write_stamp(&mut msg, stamp_ns());
            if data.send(msg).await.is_err() {
                break;
            }
            bytes += size;
            n += 1;
        }
        let secs = clock::now().saturating_duration_since(start).as_secs_f64();
        let mut end_msg = b"END".to_vec();
        end_msg.extend_from_slice(&n.to_be_bytes());
        let _ = control.send(end_msg).await;
        (bytes, n, secs)
    });
    progress.on_start();
    let mut tick = tokio::time::interval(o.interval.into());
    tick.tick().await;
    let first = conn.stats().await?;
    let mut prev = first;
    let mut latest = Report::default();
    let mut sender = Some(sender);
    let mut sent = (0, 0, 0.0);
    let mut at_stop = Report::default();
    let mut final_wait: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            m = conn.recv() => {
                let Some(m) = m else {
                    return Err(PerfError::Protocol("the server closed the connection before the final report".into()));
                };
                if let Some(r) = Report::decode(&m.data) {
                    if r.last && sender.is_some() {
                        at_stop = latest;
                    }
                    latest = r;
                    if r.last { break; }
                }
            }
            _ = tick.tick() => {
                let s = conn.stats().await?;
                progress.on_interval(latest.bytes, sample(&s, &prev));
                prev = s;
            }
            r = async { sender.as_mut().expect("guarded by the branch condition").await }, if sender.is_some() => {
                sender = None;
                sent = r.map_err(PerfError::Task)?;
                at_stop = latest;
                final_wait = Some(Box::pin(tokio::time::sleep(FINAL_WAIT)));
            }
            _ = async { final_wait.as_mut().expect("guarded by the branch condition").await }, if final_wait.is_some() => {
                return Err(PerfError::Protocol(format!("no final report from the server within {FINAL_WAIT:?}")));
            }
        }
    }
    if let Some(task) = sender.take() {
        // The server answers END, which is the sender task's last act, so its
        // final report can win the race against the task's completion: the
        // task has finished or is about to.
        match tokio::time::timeout(FINAL_WAIT, task).await {
            Ok(r) => sent = r.map_err(PerfError::Task)?,
            Err(_) => {
                return Err(PerfError::Protocol(
                    "final report before the client finished sending".into(),
                ))
            }
        }
    }
    let s = conn.stats().await?;
    let summary = Summary {
        sent_bytes: sent.0,
        sent_messages: sent.1,
        send_seconds: sent.2,
        at_stop,
        report: latest,
        client_cpu_us: cpu_us().saturating_sub(cpu0),
        rtt_ms: s.srtt.as_secs_f64() * 1e3,
        retrans: s.retransmitted_bytes,
        loss_pct: if s.packets_sent > first.packets_sent {
            100.0 * (s.packets_lost - first.packets_lost.min(s.packets_lost)) as f64
                / (s.packets_sent - first.packets_sent) as f64
        } else {
            0.0
        },
    };
    let _ = conn.close(ErrorCode::NO_ERROR, b"done").await;
    // Let the driver send the CLOSE: returning at once ended the runtime
    // first, and a `--once` server then waited out its idle timeout (30 s)
    // before it exited. The handle's channel ends when the driver forgets
    // the connection, after its closing period (3 PTO): this waits that
    // out, at most CLOSE_WAIT.
    let _ = tokio::time::timeout(CLOSE_WAIT, async { while conn.recv().await.is_some() {} }).await;
    Ok(summary)
}
