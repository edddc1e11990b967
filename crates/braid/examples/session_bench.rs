//! A benchmark driver for `braid::session` and `braid::relay` on real
//! sockets (issue 12's benchmarks; run by `testbed/bench-session.sh`,
//! results in docs/BENCHMARKS.md).
//!
//! One binary, five roles (three of braid, two of cross traffic), each its
//! own process so that a relay can be killed with `kill -9` and every side
//! can sit in its own network namespace:
//!
//! ```text
//! session_bench sink   --listen ADDR [--out FILE]
//! session_bench source --to ADDR --path P [--path P …] [--scheduler pgos|msfq|wfq|rr|minrtt]
//!                      --stream NAME,rate,MBIT,PROB | NAME,be,MBIT | NAME,bulk  [--stream …]
//!                      [--secs N] [--window SAMPLES] [--reliable] [--message BYTES]
//!                      [--cap-unscheduled QUANTILE] [--congestion cubic|newreno|fast]
//!                      [--scheduled-first 1]
//! session_bench relay  --listen ADDR
//! session_bench cross  --to ADDR --trace FILE --mean MBIT [--bind ADDR] [--packet BYTES]
//!                      [--secs N] [--offset SECS]
//! session_bench discard --listen ADDR [--secs N]
//! ```
//!
//! Streams are opened in the order given (ids 1, 2, …). A `rate` stream
//! carries a `min_rate(MBIT, PROB)` guarantee and a constant-rate source of
//! 25 frames/s at MBIT (seed 000's SmartPointer streams); a `be` stream is
//! best effort with a 25 frames/s source at MBIT; a `bulk` stream is best
//! effort with a source that always has data. Sources stop after `--secs`.
//! With `--message BYTES` a frame is sent as messages of at most BYTES
//! (the sink then counts it as its packets arrive, not when it is whole).
//!
//! Output is plain lines, wall-clock times in Unix milliseconds so that the
//! processes' lines can be lined up:
//! * source: `start MS`, `event MS DEBUG`, `end MS`;
//! * sink: `win STREAM UNIX_SECOND BYTES` (bytes delivered per 1 s window),
//!   `bin STREAM UNIX_10MS BYTES` (the same per 10 ms),
//!   `gap STREAM START_MS LEN_MS` (every pause of 50 ms or more between two
//!   messages of a stream), `total STREAM BYTES FIRST_MS LAST_MS`,
//!   `met STREAM SHARE` (the share of the stream's windows the sink session
//!   judged met by braid's one definition, `braid_core::session::meter`,
//!   at its last look; guarantees only), `close MS REASON`;
//! * relay: `relay ADDR` once bound;
//! * cross: `cross LOCAL -> ADDR mean MBIT Mbit/s` once bound, `cross-end
//!   packets N errors N bytes N` at the end;
//! * discard: `discard ADDR` once bound, `discard-end packets N bytes N`.
#![allow(clippy::disallowed_methods)] // a benchmark reads the wall clock: that is what it measures

use braid::relay::{Relay, RelayConfig};
use braid::session::{ListenerConfig, PathConfig, Session, SessionConfig, SessionListener};
use braid_core::scheduler::{PgosConfig, StreamSpec};
use braid_core::session::{Delivery, SchedulerKind, StreamConfig};
use braid_core::units::Bandwidth;
use braid_core::Duration;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Frames per second of `rate` and `be` sources (the seed's 25).
const FPS: u64 = 25;
/// Message size of `bulk` sources.
const BULK_MESSAGE: usize = 16 * 1024;
/// Pauses in a stream's delivery at least this long are printed.
const GAP_MS: u64 = 50;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `--key value` pairs; keys may repeat.
struct Args(Vec<(String, String)>);

impl Args {
    fn parse(rest: &[String]) -> Result<Args, BoxError> {
        let mut out = Vec::new();
        let mut it = rest.iter();
        while let Some(k) = it.next() {
            let key = k
                .strip_prefix("--")
                .ok_or_else(|| format!("expected --option, got {k:?}"))?;
            if key == "reliable" {
                out.push((key.to_string(), String::new()));
                continue;
            }
            let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
            out.push((key.to_string(), v.clone()));
        }
        Ok(Args(out))
    }
    fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    fn one(&self, key: &str) -> Option<&str> {
        self.all(key).last().copied()
    }
    fn need(&self, key: &str) -> Result<&str, BoxError> {
        self.one(key)
            .ok_or_else(|| format!("--{key} is required").into())
    }
    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    // SESSION_BENCH_THREADS=1: a current-thread runtime, as `braid relay`
    // runs (default: two workers, as `braid stream`/`serve` run).
    let threads = match std::env::var("SESSION_BENCH_THREADS") {
        Err(_) => 2,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n @ 1..=64) => n,
            _ => {
                eprintln!("session_bench: SESSION_BENCH_THREADS must be 1..=64, not {v:?}");
                std::process::exit(2);
            }
        },
    };
    let rt = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(2))
            .enable_all()
            .build()
    }
    .expect("a tokio runtime starts");
    let r = match argv.get(1).map(String::as_str) {
        Some("sink") => Args::parse(&argv[2..]).and_then(|a| rt.block_on(sink(a))),
        Some("source") => Args::parse(&argv[2..]).and_then(|a| rt.block_on(source(a))),
        Some("relay") => Args::parse(&argv[2..]).and_then(|a| rt.block_on(relay(a))),
        Some("cross") => Args::parse(&argv[2..]).and_then(|a| rt.block_on(cross(a))),
        Some("discard") => Args::parse(&argv[2..]).and_then(|a| rt.block_on(discard(a))),
        _ => Err("usage: session_bench sink|source|relay|cross|discard --option value …".into()),
    };
    if let Err(e) = r {
        eprintln!("session_bench: {e}");
        std::process::exit(1);
    }
}

/// What one stream's sink side has seen.
#[derive(Default)]
struct Seen {
    windows: BTreeMap<u64, u64>,
    /// Bytes per 10 ms bin (so a summary can place 1 s windows at any phase).
    bins: BTreeMap<u64, u64>,
    bytes: u64,
    first: u64,
    last: u64,
    gaps: Vec<(u64, u64)>,
}

async fn sink(a: Args) -> Result<(), BoxError> {
    let addr: SocketAddr = a.need("listen")?.parse()?;
    let mut listener = SessionListener::bind(addr, ListenerConfig::default())?;
    println!("listen {}", listener.local_addr());
    let mut inc = listener.accept().await?;
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    // The sink session's own verdicts, looked at about once a second.
    let mut met: BTreeMap<u32, f64> = BTreeMap::new();
    let mut looked = 0;
    while let Some(m) = inc.recv().await {
        let t = now_ms();
        if t >= looked + 1000 {
            looked = t;
            if let Ok(snap) = inc.snapshot().await {
                for st in &snap.streams {
                    if let Some(share) = st.windows_met {
                        met.insert(st.id.0, share);
                    }
                }
            }
        }
        let s = seen.entry(m.stream.0).or_default();
        if s.bytes == 0 {
            s.first = t;
        } else if t - s.last >= GAP_MS {
            s.gaps.push((s.last, t - s.last));
        }
        s.last = t;
        s.bytes += m.data.len() as u64;
        *s.windows.entry(t / 1000).or_default() += m.data.len() as u64;
        *s.bins.entry(t / 10).or_default() += m.data.len() as u64;
    }
    let mut out: Box<dyn std::io::Write> = match a.one("out") {
        Some(f) => Box::new(std::fs::File::create(f)?),
        None => Box::new(std::io::stdout()),
    };
    for (id, s) in &seen {
        for (w, b) in &s.windows {
            writeln!(out, "win {id} {w} {b}")?;
        }
        for (b, n) in &s.bins {
            writeln!(out, "bin {id} {b} {n}")?;
        }
        for (start, len) in &s.gaps {
            writeln!(out, "gap {id} {start} {len}")?;
        }
        writeln!(out, "total {id} {} {} {}", s.bytes, s.first, s.last)?;
        if let Some(share) = met.get(id) {
            writeln!(out, "met {id} {share}")?;
        }
    }
    writeln!(out, "close {} {:?}", now_ms(), inc.close_reason())?;
    Ok(())
}

/// One `--stream` argument.
struct StreamArg {
    config: StreamConfig,
    /// Source rate (None: always has data).
    rate: Option<Bandwidth>,
}

fn stream_arg(s: &str, reliable: bool) -> Result<StreamArg, BoxError> {
    let f: Vec<&str> = s.split(',').collect();
    let mbit = |i: usize| -> Result<Bandwidth, BoxError> {
        let v: f64 = f.get(i).ok_or("missing rate")?.parse()?;
        Ok(Bandwidth::from_mbps_f64(v))
    };
    let (spec, rate) = match f.get(1).copied() {
        Some("rate") => {
            let p: f64 = f.get(3).ok_or("missing probability")?.parse()?;
            (StreamSpec::min_rate(mbit(2)?, p)?, Some(mbit(2)?))
        }
        // Weight: the source's rate in bit/s, the unit a guaranteed
        // stream's fair weight has (`StreamSpec::fair_weight`): the seed's
        // fair-queueing weights are the targets. (Until 2026-11-28 this was
        // Mbit/s, which gave a 3.249 Mbit/s stream 46 000 times Bond2's
        // weight: MSFQ and WFQ then served the critical streams first.)
        Some("be") => (
            StreamSpec::best_effort(mbit(2)?.bps().max(1))?,
            Some(mbit(2)?),
        ),
        Some("bulk") => (StreamSpec::best_effort(1)?, None),
        _ => {
            return Err(format!(
                "bad --stream {s:?}: NAME,rate,MBIT,PROB | NAME,be,MBIT | NAME,bulk"
            )
            .into())
        }
    };
    let mut config = StreamConfig::new(spec).with_name(f[0]);
    if reliable {
        config = config.with_delivery(Delivery::Reliable);
    }
    Ok(StreamArg { config, rate })
}

fn scheduler(name: &str) -> Result<SchedulerKind, BoxError> {
    Ok(match name {
        "pgos" => SchedulerKind::Pgos(PgosConfig::default()),
        "msfq" => SchedulerKind::Msfq,
        "wfq" => SchedulerKind::Wfq,
        "rr" => SchedulerKind::RoundRobin,
        "minrtt" => SchedulerKind::MinRtt,
        _ => return Err(format!("unknown scheduler {name:?}").into()),
    })
}

async fn source(a: Args) -> Result<(), BoxError> {
    let to: SocketAddr = a.need("to")?.parse()?;
    let mut config = SessionConfig {
        paths: a
            .all("path")
            .iter()
            .map(|p| p.parse::<PathConfig>())
            .collect::<Result<_, _>>()?,
        ..SessionConfig::default()
    };
    config.core.scheduler = scheduler(a.one("scheduler").unwrap_or("pgos"))?;
    config.core.cap_unscheduled = a
        .one("cap-unscheduled")
        .map(|q| q.parse::<f64>())
        .transpose()?;
    if let Some(w) = a.one("window") {
        config.core.estimate_window = w.parse()?;
    }
    config.core.scheduled_first = match a.one("scheduled-first").unwrap_or("0") {
        "0" => false,
        "1" => true,
        v => {
            return Err(
                format!("--scheduled-first {v:?}: 1 (serve scheduled traffic first) or 0").into(),
            )
        }
    };
    config.core.transport.congestion = match a.one("congestion").unwrap_or("cubic") {
        "cubic" => braid_core::transport::CongestionKind::Cubic,
        "newreno" => braid_core::transport::CongestionKind::NewReno,
        "fast" => braid_core::transport::CongestionKind::Fast,
        c => return Err(format!("--congestion {c:?}: cubic, newreno or fast").into()),
    };
    let secs: u64 = a.one("secs").unwrap_or("10").parse()?;
    let reliable = a.has("reliable");
    let message: usize = a.one("message").unwrap_or("0").parse()?;
    let streams: Vec<StreamArg> = a
        .all("stream")
        .iter()
        .map(|s| stream_arg(s, reliable))
        .collect::<Result<_, _>>()?;
    let mut session = Session::connect(to, config).await?;
    println!("start {}", now_ms());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for s in streams {
        let mut st = session.open_stream(s.config).await?;
        tasks.push(tokio::spawn(async move {
            match s.rate {
                Some(rate) => {
                    let frame = Bytes::from(vec![0u8; (rate.bytes_per_sec() / FPS) as usize]);
                    let piece = if message == 0 { frame.len() } else { message };
                    let mut tick =
                        tokio::time::interval(std::time::Duration::from_millis(1000 / FPS));
                    while tokio::time::Instant::now() < deadline {
                        tick.tick().await;
                        for at in (0..frame.len()).step_by(piece.max(1)) {
                            let m = frame.slice(at..(at + piece).min(frame.len()));
                            match tokio::time::timeout_at(deadline, st.send(m)).await {
                                Ok(r) => r?,
                                Err(_) => return Ok(()),
                            }
                        }
                    }
                }
                None => {
                    let block = Bytes::from(vec![0u8; BULK_MESSAGE]);
                    while let Ok(r) =
                        tokio::time::timeout_at(deadline, st.send(block.clone())).await
                    {
                        r?;
                    }
                }
            }
            Ok::<_, braid::session::SessionError>(())
        }));
    }
    // Events until the sources stop.
    let stdout = std::io::stdout();
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline, session.next_event()).await {
        if !matches!(e, braid_core::session::Event::Stats { .. }) {
            writeln!(stdout.lock(), "event {} {e:?}", now_ms())?;
        }
    }
    for t in tasks {
        if let Err(e) = t.await? {
            println!("stream-error {} {e}", now_ms());
        }
    }
    println!("end {}", now_ms());
    if let Ok(snap) = session.snapshot().await {
        for p in &snap.paths {
            println!("path {p:?}");
        }
    }
    // A bulk stream may still hold up to the session's byte bound: what
    // the sink got by now is what counts, so a slow close is no failure.
    if let Err(e) = session.close_within(Duration::from_secs(3)).await {
        println!("close {} {e}", now_ms());
    }
    Ok(())
}

async fn relay(a: Args) -> Result<(), BoxError> {
    let addr: SocketAddr = a.need("listen")?.parse()?;
    let r = Relay::bind(addr, RelayConfig::default())?;
    println!("relay {}", r.local_addr());
    std::io::stdout().flush()?;
    tokio::signal::ctrl_c().await?;
    if let Ok(s) = r.snapshot().await {
        println!("stats {:?}", s.stats);
    }
    Ok(())
}

/// Cross traffic through a bottleneck, as the seed's testbed injected it:
/// UDP datagrams of `--packet` bytes on the wire (IP and UDP headers
/// included, default 1200 as braid-sim's packet-level tables) at the rate
/// of a bandwidth trace in 100 ms bins, scaled to a mean of `--mean`
/// Mbit/s, from `--offset` seconds into the trace (default 0; wrapping at
/// its end), for `--secs`.
/// Paced against the wall clock every millisecond, so a late tick sends
/// what is due rather than falling behind. Not congestion controlled: it
/// is the non-responsive load the session has to measure and live with.
async fn cross(a: Args) -> Result<(), BoxError> {
    const HEADERS: usize = 28; // IPv4 + UDP
    const BIN_MS: u64 = 100;
    const BIN: std::time::Duration = std::time::Duration::from_millis(BIN_MS);
    let to: SocketAddr = a.need("to")?.parse()?;
    let bind: SocketAddr = a.one("bind").unwrap_or("0.0.0.0:0").parse()?;
    let mean: f64 = a.need("mean")?.parse()?;
    let packet: usize = a.one("packet").unwrap_or("1200").parse()?;
    let secs: u64 = a.one("secs").unwrap_or("10").parse()?;
    let offset: f64 = a.one("offset").unwrap_or("0").parse()?;
    if !(HEADERS + 1..=1500).contains(&packet) {
        return Err(format!("--packet {packet}: {}..=1500 bytes", HEADERS + 1).into());
    }
    let file = a.need("trace")?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let trace = braid_core::trace::Trace::parse(&text, None).map_err(|e| format!("{file}: {e}"))?;
    let bins = trace.rate_series(Duration::from_millis(BIN_MS));
    let avg = bins.iter().map(|b| b.bps() as f64).sum::<f64>() / bins.len().max(1) as f64;
    if avg <= 0.0 {
        return Err(format!("{file}: the trace carries nothing").into());
    }
    let k = mean * 1e6 / avg;
    // Bits due by the start of each bin (one more entry than bins).
    let mut due_at = vec![0.0f64];
    for b in &bins {
        let before = due_at[due_at.len() - 1];
        due_at.push(before + b.bps() as f64 * k * BIN.as_secs_f64());
    }
    let (period, span) = (due_at[bins.len()], bins.len() as f64 * BIN.as_secs_f64());
    // Bits due by trace time `t` (seconds, wrapping at the trace's end).
    let due_by = |t: f64| {
        let laps = (t / span).floor();
        let into = t - laps * span;
        let i = ((into / BIN.as_secs_f64()) as usize).min(bins.len() - 1);
        let rate = (due_at[i + 1] - due_at[i]) / BIN.as_secs_f64();
        laps * period + due_at[i] + rate * (into - i as f64 * BIN.as_secs_f64())
    };
    let sock = tokio::net::UdpSocket::bind(bind).await?;
    sock.connect(to).await?;
    println!("cross {} -> {to} mean {mean} Mbit/s", sock.local_addr()?);
    std::io::stdout().flush()?;
    let payload = vec![0u8; packet - HEADERS];
    let wire = (packet * 8) as f64;
    let start = tokio::time::Instant::now();
    let stop = start + std::time::Duration::from_secs(secs);
    // What was due before `offset` is not owed: the replay starts there.
    let (mut bits, mut sent, mut errors) = (due_by(offset), 0u64, 0u64);
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(1));
    while tick.tick().await < stop {
        let due = due_by(offset + start.elapsed().as_secs_f64());
        while bits + wire <= due {
            bits += wire;
            match sock.try_send(&payload) {
                Ok(_) => sent += 1,
                Err(_) => errors += 1, // a full socket buffer or an ICMP error: the load is lost, as on a wire
            }
        }
    }
    println!(
        "cross-end packets {sent} errors {errors} bytes {}",
        sent * packet as u64
    );
    Ok(())
}

/// Receives and drops datagrams (the far end of `cross`) for `--secs`
/// (default: until killed), then prints what it got.
async fn discard(a: Args) -> Result<(), BoxError> {
    let addr: SocketAddr = a.need("listen")?.parse()?;
    let secs: u64 = a.one("secs").unwrap_or("0").parse()?;
    let sock = tokio::net::UdpSocket::bind(addr).await?;
    println!("discard {}", sock.local_addr()?);
    std::io::stdout().flush()?;
    let stop =
        (secs > 0).then(|| tokio::time::Instant::now() + std::time::Duration::from_secs(secs));
    let (mut buf, mut packets, mut bytes) = (vec![0u8; 2048], 0u64, 0u64);
    loop {
        let got = match stop {
            Some(at) => match tokio::time::timeout_at(at, sock.recv(&mut buf)).await {
                Ok(r) => r?,
                Err(_) => break,
            },
            None => sock.recv(&mut buf).await?,
        };
        packets += 1;
        bytes += got as u64;
    }
    println!("discard-end packets {packets} bytes {bytes}");
    Ok(())
}
