//! The TCP side of `braid perf`: the server's handling of one test
//! ([`serve`]) and the client ([`client`]), with the kernel's `TCP_INFO`
//! for RTT, congestion window and retransmissions. Same exchange as RUDP
//! (see the [parent module](super)), on one TCP connection: the server
//! writes a [`Report`] every [`REPORT_EVERY`]; the client ends by shutting
//! down its write side.
//!
//! Each client write is one message framed by a [`HEADER_LEN`]-byte header
//! inside it: the message's whole length (8 bytes, big-endian, header
//! included) and the send stamp (8 bytes), so the server's [`Framer`] can
//! find message boundaries in the byte stream. Messages are therefore at
//! least [`HEADER_LEN`] bytes.

use super::arrivals::{stamp_ns, write_stamp, STAMP_LEN};
use super::{
    cpu_us, wait_due, ClientOptions, Counter, PerfError, Progress, Report, Sample, Served, Summary,
    REPORT_EVERY, REPORT_LEN, TCP_CHUNK,
};
use crate::clock;
use crate::tcp_info::tcp_info;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bytes of the frame header at the start of every TCP message: its length
/// (header included), then the send stamp.
pub const HEADER_LEN: usize = 8 + STAMP_LEN;

/// Finds message boundaries in the client's byte stream (see the module
/// docs): feed it what arrives, in order; it calls back once per message,
/// when the message's last byte arrived, with the message's send stamp.
#[derive(Debug, Default)]
pub struct Framer {
    header: [u8; HEADER_LEN],
    have: usize,
    remaining: u64,
    stamp: u64,
}

impl Framer {
    /// Consumes `bytes`, calling `on_message(stamp)` for every message that
    /// ends in them. A length below [`HEADER_LEN`] counts as a message of
    /// just its header.
    pub fn feed(&mut self, mut bytes: &[u8], mut on_message: impl FnMut(u64)) {
        while !bytes.is_empty() {
            if self.have < HEADER_LEN {
                let take = (HEADER_LEN - self.have).min(bytes.len());
                self.header[self.have..self.have + take].copy_from_slice(&bytes[..take]);
                self.have += take;
                bytes = &bytes[take..];
                if self.have < HEADER_LEN {
                    return;
                }
                let word = |r: std::ops::Range<usize>| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&self.header[r]);
                    u64::from_be_bytes(a)
                };
                let len = word(0..8);
                self.stamp = word(8..HEADER_LEN);
                self.remaining = len.saturating_sub(HEADER_LEN as u64);
            }
            let take = self.remaining.min(bytes.len() as u64);
            self.remaining -= take;
            bytes = &bytes[take as usize..];
            if self.remaining == 0 {
                on_message(self.stamp);
                self.have = 0;
            }
        }
    }
}

/// Sets the socket's congestion control (`TCP_CONGESTION`): root may pick
/// any algorithm the kernel has, others only those in
/// `net.ipv4.tcp_allowed_congestion_control`.
fn set_congestion(s: &TcpStream, name: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads `name.len()` bytes from the string we own.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes the frame header of a `len`-byte message into `msg`.
fn write_header(msg: &mut [u8], len: u64, stamp: u64) {
    if let Some(h) = msg.get_mut(..8) {
        h.copy_from_slice(&len.to_be_bytes());
    }
    if let Some(rest) = msg.get_mut(8..) {
        write_stamp(rest, stamp);
    }
}

/// A test connection that sends nothing for this long is closed (a silent
/// or dead client must not hold the server's task and socket forever).
pub const SERVE_SILENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves one TCP test on an accepted stream: counts what arrives, reports
/// every [`REPORT_EVERY`], and once the client shuts down its side sends
/// the final report, which it returns with the per-message statistics.
///
/// # Errors
/// [`PerfError::Io`] if reading or writing fails, [`PerfError::Protocol`]
/// if the client sends nothing for [`SERVE_SILENCE`].
pub async fn serve(s: TcpStream) -> Result<Served, PerfError> {
    serve_within(s, SERVE_SILENCE).await
}

/// [`serve`] with the silence limit given.
async fn serve_within(
    mut s: TcpStream,
    silence_limit: std::time::Duration,
) -> Result<Served, PerfError> {
    let _ = s.set_nodelay(true);
    let (mut rd, mut wr) = s.split();
    let mut count = Counter::new();
    let mut framer = Framer::default();
    let mut buf = vec![0u8; TCP_CHUNK];
    let mut tick = tokio::time::interval(REPORT_EVERY);
    let mut heard = clock::now();
    loop {
        let silence = braid_core::Duration::from(silence_limit);
        tokio::select! {
            n = rd.read(&mut buf) => {
                let n = n.map_err(PerfError::io("reading"))?;
                if n == 0 { break; }
                heard = clock::now();
                count.add_bytes(n);
                framer.feed(&buf[..n], |stamp| count.add_message(Some(stamp)));
            }
            _ = tick.tick() => {
                if clock::now().saturating_duration_since(heard) > silence {
                    return Err(PerfError::Protocol(format!(
                        "the client sent nothing for {} s",
                        silence_limit.as_secs_f64()
                    )));
                }
                wr.write_all(&count.report(false).encode()).await.map_err(PerfError::io("writing a report"))?;
            }
        }
    }
    let r = count.report(true);
    wr.write_all(&r.encode())
        .await
        .map_err(PerfError::io("writing the final report"))?;
    wr.shutdown().await.ok();
    Ok(Served {
        report: r,
        drops: None,
        arrivals: count.arrivals.summary(),
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
    let s = tokio::time::timeout(std::time::Duration::from_secs(10), TcpStream::connect(to))
        .await
        .map_err(|_| PerfError::Protocol(format!("connecting to {to}: timed out")))?
        .map_err(PerfError::io(format!("connecting to {to}")))?;
    if let Some(cc) = &o.tcp_congestion {
        set_congestion(&s, cc).map_err(PerfError::io(format!(
            "setting TCP congestion control {cc:?}"
        )))?;
    }
    // Frames are latency-sensitive messages: send each one's tail at once
    // instead of holding it for Nagle (bulk writes fill segments anyway).
    if o.frames.is_some() {
        let _ = s.set_nodelay(true);
    }
    let (mut rd, mut wr) = s.into_split();
    let cpu0 = cpu_us();
    let opts = o.clone();
    let sender = tokio::spawn(async move {
        let mut msg = vec![0x5a_u8; (opts.max_size() as usize).max(HEADER_LEN)];
        let start = clock::now();
        let end = start + opts.duration;
        let (mut bytes, mut n) = (0u64, 0u64);
        loop {
            wait_due(&opts, start, end, n, bytes).await;
            if clock::now() >= end {
                break;
            }
            let size = opts.size_of(n).max(HEADER_LEN as u64);
            write_header(&mut msg, size, stamp_ns());
            if wr.write_all(&msg[..size as usize]).await.is_err() {
                break;
            }
            bytes += size;
            n += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_client_is_closed() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = l.local_addr().expect("addr");
            // Connected, then silent: never sends, never closes.
            let _client = TcpStream::connect(addr).await.expect("connect");
            let (s, _) = l.accept().await.expect("accept");
            let r = serve_within(s, std::time::Duration::from_millis(300)).await;
            assert!(matches!(r, Err(PerfError::Protocol(_))), "{r:?}");
        });
    }

    fn message(len: u64, stamp: u64) -> Vec<u8> {
        let mut m = vec![0xa5; len.max(HEADER_LEN as u64) as usize];
        write_header(&mut m, len, stamp);
        m
    }

    #[test]
    fn framer_finds_messages_however_the_stream_is_cut() {
        let mut stream = Vec::new();
        let lens = [16u64, 17, 100, 4096, 16, 70_000];
        for (i, &l) in lens.iter().enumerate() {
            stream.extend(message(l, 1000 + i as u64));
        }
        for cut in [1usize, 3, 15, 16, 17, 1000, 1 << 20] {
            let mut f = Framer::default();
            let mut got = Vec::new();
            for chunk in stream.chunks(cut) {
                f.feed(chunk, |s| got.push(s));
            }
            assert_eq!(got, (1000..1006).collect::<Vec<u64>>(), "cut {cut}");
        }
    }

    #[test]
    fn framer_survives_a_bogus_length() {
        let mut f = Framer::default();
        let mut n = 0;
        // Length 3 (below the header): a message of just its header.
        f.feed(&message(3, 9)[..HEADER_LEN], |_| n += 1);
        f.feed(&message(20, 9), |_| n += 1);
        assert_eq!(n, 2);
    }
}
