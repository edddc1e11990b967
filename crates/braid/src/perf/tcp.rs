//! The TCP side of `braid perf`: the server's handling of one test
//! ([`serve`]) and the client ([`client`]), with the kernel's `TCP_INFO`
//! for RTT, congestion window and retransmissions. Same exchange as RUDP
//! (see the [parent module](super)), on one TCP connection: the server
//! writes a [`Report`] every [`REPORT_EVERY`]; the client ends by shutting
//! down its write side.

use super::{
    cpu_us, pace, ClientOptions, Counter, PerfError, Progress, Report, Sample, Summary,
    REPORT_EVERY, REPORT_LEN, TCP_CHUNK,
};
use crate::clock;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serves one TCP test on an accepted stream: counts what arrives, reports
/// every [`REPORT_EVERY`], and once the client shuts down its side sends
/// the final report, which it returns.
///
/// # Errors
/// [`PerfError::Io`] if reading or writing fails.
pub async fn serve(mut s: TcpStream) -> Result<Report, PerfError> {
    let _ = s.set_nodelay(true);
    let (mut rd, mut wr) = s.split();
    let mut count = Counter::new();
    let mut buf = vec![0u8; TCP_CHUNK];
    let mut tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tokio::select! {
            n = rd.read(&mut buf) => {
                let n = n.map_err(PerfError::io("reading"))?;
                if n == 0 { break; }
                count.add(n);
            }
            _ = tick.tick() => {
                wr.write_all(&count.report(false).encode()).await.map_err(PerfError::io("writing a report"))?;
            }
        }
    }
    let r = count.report(true);
    wr.write_all(&r.encode())
        .await
        .map_err(PerfError::io("writing the final report"))?;
    wr.shutdown().await.ok();
    Ok(r)
}

/// The fields of `TCP_INFO` that perf shows.
#[derive(Debug, Clone, Copy, Default)]
struct TcpInfo {
    rtt_us: u32,
    cwnd_bytes: u64,
    total_retrans: u32,
    segs_out: u32,
}

fn tcp_info(s: &TcpStream) -> Option<TcpInfo> {
    use std::os::fd::AsRawFd;
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the zeroed
    // `tcp_info` we own; older kernels write fewer (the rest stays zero).
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: zero-initialised plain-old-data, partly filled by the kernel.
    let i = unsafe { info.assume_init() };
    Some(TcpInfo {
        rtt_us: i.tcpi_rtt,
        cwnd_bytes: u64::from(i.tcpi_snd_cwnd) * u64::from(i.tcpi_snd_mss),
        total_retrans: i.tcpi_total_retrans,
        segs_out: i.tcpi_segs_out,
    })
}

/// Runs one TCP test against the perf server at `to` (writes of
/// `o.message_size` bytes), telling `progress` as it goes; returns what it
/// measured once the final report arrived.
///
/// # Errors
/// [`PerfError`] if the connection cannot be made or the server goes away
/// before its final report.
pub async fn client(
    o: &ClientOptions,
    to: SocketAddr,
    progress: &mut dyn Progress,
) -> Result<Summary, PerfError> {
    let size = o.message_size;
    let s = tokio::time::timeout(std::time::Duration::from_secs(10), TcpStream::connect(to))
        .await
        .map_err(|_| PerfError::Protocol(format!("connecting to {to}: timed out")))?
        .map_err(PerfError::io(format!("connecting to {to}")))?;
    let (mut rd, mut wr) = s.into_split();
    let cpu0 = cpu_us();
    let (duration, rate) = (o.duration, o.rate);
    let sender = tokio::spawn(async move {
        let msg = vec![0x5a_u8; size as usize];
        let start = clock::now();
        let end = start + duration;
        let (mut bytes, mut n) = (0u64, 0u64);
        while clock::now() < end {
            if wr.write_all(&msg).await.is_err() {
                break;
            }
            bytes += size;
            n += 1;
            pace(rate, start, bytes).await;
        }
        let secs = clock::now().saturating_duration_since(start).as_secs_f64();
        let _ = wr.shutdown().await;
        (bytes, n, secs)
    });
    progress.on_start();
    let mut tick = tokio::time::interval(o.interval.into());
    tick.tick().await;
    let first = tcp_info(rd.as_ref()).unwrap_or_default();
    let mut prev = first;
    let mut latest = Report::default();
    let mut rbuf = [0u8; REPORT_LEN];
    let mut sender = Some(sender);
    let mut sent = (0, 0, 0.0);
    let mut at_stop = Report::default();
    loop {
        tokio::select! {
            r = rd.read_exact(&mut rbuf) => {
                r.map_err(PerfError::io("the server closed the connection before the final report"))?;
                let Some(r) = Report::decode(&rbuf) else {
                    return Err(PerfError::Protocol("malformed report from the server".into()));
                };
                latest = r;
                if r.last { break; }
            }
            _ = tick.tick() => {
                let i = tcp_info(rd.as_ref()).unwrap_or_default();
                let segs = i.segs_out.wrapping_sub(prev.segs_out);
                let rtx = i.total_retrans.wrapping_sub(prev.total_retrans);
                progress.on_interval(latest.bytes, Sample {
                    rtt_ms: f64::from(i.rtt_us) / 1e3,
                    loss_pct: if segs > 0 { 100.0 * f64::from(rtx) / f64::from(segs) } else { 0.0 },
                    cwnd: i.cwnd_bytes,
                    retrans: u64::from(rtx),
                });
                prev = i;
            }
            r = async { sender.as_mut().expect("guarded by the branch condition").await }, if sender.is_some() => {
                sender = None;
                sent = r.map_err(PerfError::Task)?;
                at_stop = latest;
            }
        }
    }
    if let Some(task) = sender {
        sent = task.await.map_err(PerfError::Task)?;
        at_stop = latest;
    }
    let i = tcp_info(rd.as_ref()).unwrap_or_default();
    let segs = i.segs_out.wrapping_sub(first.segs_out);
    let rtx = i.total_retrans.wrapping_sub(first.total_retrans);
    Ok(Summary {
        sent_bytes: sent.0,
        sent_messages: sent.1,
        send_seconds: sent.2,
        at_stop,
        report: latest,
        client_cpu_us: cpu_us().saturating_sub(cpu0),
        rtt_ms: f64::from(i.rtt_us) / 1e3,
        retrans: u64::from(rtx),
        loss_pct: if segs > 0 {
            100.0 * f64::from(rtx) / f64::from(segs)
        } else {
            0.0
        },
    })
}
