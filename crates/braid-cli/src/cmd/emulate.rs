//! `braid emulate`: an emulated wide-area link between two network
//! namespaces (see `braid::emulate` and docs/emulate.md). This file turns
//! flags into an [`EmulatorConfig`], then waits: for a signal, the end of
//! `--duration`, the end of the `--watch-pid` process, a device failure, or
//! a line on the `--control` FIFO that changes the link.

use anyhow::{bail, Context};
use braid::emulate::{Direction, Emulator, EmulatorConfig, Ipv4Cidr, Side};
use braid_core::link::{Capacity, LinkConfig};
use braid_core::{Bandwidth, ByteSize, Duration};
use std::path::PathBuf;

/// How often the main thread looks at signals, the watched process and the
/// control FIFO.
const TICK: std::time::Duration = std::time::Duration::from_millis(20);

/// Flags of `braid emulate`.
#[derive(Debug, clap::Args)]
pub struct EmulateArgs {
    /// Namespace of side A (a name under /run/netns, or a path).
    #[arg(long, value_name = "NS")]
    pub ns_a: String,
    /// Namespace of side B.
    #[arg(long, value_name = "NS")]
    pub ns_b: String,
    /// Device name in A.
    #[arg(long, default_value = "braid0", value_name = "NAME")]
    pub dev_a: String,
    /// Device name in B.
    #[arg(long, default_value = "braid0", value_name = "NAME")]
    pub dev_b: String,
    /// IPv4 address of A's device (e.g. 10.9.0.1/24); else configure it with `ip`.
    #[arg(long, value_name = "CIDR")]
    pub addr_a: Option<Ipv4Cidr>,
    /// IPv4 address of B's device.
    #[arg(long, value_name = "CIDR")]
    pub addr_b: Option<Ipv4Cidr>,
    /// Link rate (e.g. 20mbit, 1.5gbit).
    #[arg(
        long,
        value_name = "RATE",
        required_unless_present_any = ["trace", "scenario"],
        conflicts_with = "trace"
    )]
    pub rate: Option<Bandwidth>,
    /// Bandwidth trace giving the rate over time (mahimahi, time<TAB>Mbit/s,
    /// 5G CSV; detected); it loops.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Rate bins a trace is turned into.
    #[arg(long, default_value = "10ms", value_name = "DURATION")]
    pub trace_bin: Duration,
    /// Take the model from a braid-sim scenario's `[[link]]` (with
    /// --link): the same link the simulator runs, on a real kernel.
    #[arg(
        long,
        value_name = "FILE",
        requires = "link",
        conflicts_with_all = ["rate", "trace", "delay", "loss", "queue"]
    )]
    pub scenario: Option<PathBuf>,
    /// The scenario's link for A→B.
    #[arg(long, value_name = "NAME", requires = "scenario")]
    pub link: Option<String>,
    /// The scenario's link for B→A (default: --link).
    #[arg(long, value_name = "NAME", requires = "scenario")]
    pub back_link: Option<String>,
    /// One-way propagation delay (each direction).
    #[arg(long, default_value = "0ms", value_name = "DURATION")]
    pub delay: Duration,
    /// Random loss probability: 0.1% or 0.001.
    #[arg(long, default_value = "0", value_parser = parse_loss, value_name = "P")]
    pub loss: f64,
    /// Queue bound: bytes (150KB, 64KiB) or time at the mean rate (100ms).
    #[arg(long, default_value = "100ms", value_parser = parse_queue, value_name = "SIZE|TIME")]
    pub queue: QueueBound,
    /// B→A rate (default: --rate).
    #[arg(long, value_name = "RATE", conflicts_with = "back_trace")]
    pub back_rate: Option<Bandwidth>,
    /// B→A trace (default: --trace).
    #[arg(long, value_name = "FILE")]
    pub back_trace: Option<PathBuf>,
    /// B→A one-way delay (default: --delay).
    #[arg(long, value_name = "DURATION")]
    pub back_delay: Option<Duration>,
    /// B→A loss probability (default: --loss).
    #[arg(long, value_parser = parse_loss, value_name = "P")]
    pub back_loss: Option<f64>,
    /// B→A queue bound (default: --queue).
    #[arg(long, value_parser = parse_queue, value_name = "SIZE|TIME")]
    pub back_queue: Option<QueueBound>,
    /// Seed of the loss draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// MTU of both devices.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Stop after this long (default: until a signal).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Stop when process PID ends (the testbed passes its owner).
    #[arg(long, value_name = "PID")]
    pub watch_pid: Option<u32>,
    /// Create a FIFO here and apply lines written to it: a flag and its
    /// value without the dashes (`rate 40mbit`, `delay 30ms`, `back-loss 1%`).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Run the two packet threads in SCHED_FIFO at this priority (1-99), so
    /// that a busy machine cannot delay packets by a time slice (see
    /// docs/emulate.md for what it buys).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub realtime: Option<u8>,
    /// Print both directions' counters as one JSON line to stdout every
    /// interval (e.g. 1s), and at the end.
    #[arg(long, value_name = "DURATION")]
    pub every: Option<Duration>,
}

/// A queue bound as given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueBound {
    /// Bytes.
    Bytes(u64),
    /// Time at the mean rate.
    Time(Duration),
}

fn parse_loss(s: &str) -> Result<f64, String> {
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

fn parse_queue(s: &str) -> Result<QueueBound, String> {
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

/// What one direction's flags say.
struct DirSpec {
    capacity: Capacity,
    delay: Duration,
    loss: f64,
    queue: QueueBound,
}

impl DirSpec {
    fn link(&self, name: &str, mtu: u32) -> LinkConfig {
        let mut cfg = LinkConfig::new(name, self.capacity.clone(), self.delay);
        cfg.loss = self.loss;
        cfg.queue_bytes = match self.queue {
            QueueBound::Bytes(b) => b,
            QueueBound::Time(d) => self.capacity.mean().bytes_in(d),
        }
        .max(mtu as u64);
        cfg
    }

    fn describe(&self, cfg: &LinkConfig) -> String {
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

fn load_capacity(
    rate: Option<Bandwidth>,
    trace: Option<&PathBuf>,
    bin: Duration,
) -> anyhow::Result<Capacity> {
    match (rate, trace) {
        (Some(r), _) => {
            if r.bps() == 0 {
                bail!("--rate must be positive");
            }
            Ok(Capacity::Constant(r))
        }
        (None, Some(path)) => {
            let s = braid_sim::trace_file::load_schedule(path, None, bin, 1.0)?;
            let cap = Capacity::Schedule(s);
            if cap.mean().bps() == 0 {
                bail!("{}: the trace never has any capacity", path.display());
            }
            Ok(cap)
        }
        (None, None) => bail!("give --rate or --trace"),
    }
}

/// Both directions' models from `--scenario FILE --link A [--back-link B]`
/// (the B→A one only when --back-link names another link).
fn scenario_specs(
    path: &PathBuf,
    args: &EmulateArgs,
) -> anyhow::Result<(DirSpec, Option<DirSpec>)> {
    let scenario = braid_sim::Scenario::from_path(path)?;
    let spec_of = |name: &str| -> anyhow::Result<DirSpec> {
        let Some(i) = scenario.link_index(name) else {
            let names: Vec<_> = scenario.links.iter().map(|l| l.name.as_str()).collect();
            bail!(
                "{}: no [[link]] named {name:?} (links: {})",
                path.display(),
                names.join(", ")
            );
        };
        let cfg = scenario.link_config(&scenario.links[i])?;
        if cfg.duplicate > 0.0 || cfg.reorder > 0.0 {
            bail!(
                "{}: link {name:?} duplicates or reorders packets, which braid emulate does not do",
                path.display()
            );
        }
        Ok(DirSpec {
            capacity: cfg.capacity,
            delay: cfg.delay,
            loss: cfg.loss,
            queue: QueueBound::Bytes(cfg.queue_bytes),
        })
    };
    let link = args
        .link
        .as_deref()
        .context("--scenario needs --link NAME")?;
    let back = args.back_link.as_deref().map(spec_of).transpose()?;
    Ok((spec_of(link)?, back))
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks; no signal is sent.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Runs `braid emulate`.
pub fn run(args: EmulateArgs) -> anyhow::Result<()> {
    if args.trace_bin.is_zero() {
        bail!("--trace-bin must be positive");
    }
    let (fwd, scenario_back) = match &args.scenario {
        Some(path) => scenario_specs(path, &args)?,
        None => (
            DirSpec {
                capacity: load_capacity(args.rate, args.trace.as_ref(), args.trace_bin)?,
                delay: args.delay,
                loss: args.loss,
                queue: args.queue,
            },
            None,
        ),
    };
    let back = DirSpec {
        capacity: if let Some(b) = &scenario_back {
            b.capacity.clone()
        } else if args.back_rate.is_some() || args.back_trace.is_some() {
            load_capacity(args.back_rate, args.back_trace.as_ref(), args.trace_bin)?
        } else {
            fwd.capacity.clone()
        },
        delay: args
            .back_delay
            .or(scenario_back.as_ref().map(|b| b.delay))
            .unwrap_or(fwd.delay),
        loss: args
            .back_loss
            .or(scenario_back.as_ref().map(|b| b.loss))
            .unwrap_or(fwd.loss),
        queue: args
            .back_queue
            .or(scenario_back.as_ref().map(|b| b.queue))
            .unwrap_or(fwd.queue),
    };
    if let Some(pid) = args.watch_pid {
        if !pid_alive(pid) {
            bail!("--watch-pid {pid}: no such process");
        }
    }
    let mut specs = [fwd, back];
    let a_to_b = specs[0].link("a>b", args.mtu);
    let b_to_a = specs[1].link("b>a", args.mtu);
    let summary = format!(
        "braid emulate: {}:{} <-> {}:{}; a>b {}; b>a {}",
        args.ns_a,
        args.dev_a,
        args.ns_b,
        args.dev_b,
        specs[0].describe(&a_to_b),
        specs[1].describe(&b_to_a)
    );
    let mut control = match &args.control {
        Some(p) => Some(Control::create(p)?),
        None => None,
    };
    crate::shutdown::watch_blocking();
    let emu = Emulator::start(EmulatorConfig {
        a: Side {
            namespace: args.ns_a.clone(),
            device: args.dev_a.clone(),
            addr: args.addr_a,
        },
        b: Side {
            namespace: args.ns_b.clone(),
            device: args.dev_b.clone(),
            addr: args.addr_b,
        },
        mtu: args.mtu,
        a_to_b,
        b_to_a,
        seed: args.seed,
        realtime: args.realtime,
    })?;
    eprintln!("{summary}");
    eprintln!(
        "braid emulate: model time zero at CLOCK_MONOTONIC {} ns",
        monotonic_ns_of(emu.epoch())
    );
    let started = braid::clock::now();
    let mut next_report = args.every;
    let reason = loop {
        std::thread::park_timeout(TICK);
        let elapsed = braid::clock::now() - started;
        if crate::shutdown::signalled().is_some() {
            break Ok("signal");
        }
        if let Err(e) = emu.check() {
            break Err(e);
        }
        if let Some(d) = args.duration {
            if elapsed >= d {
                break Ok("duration reached");
            }
        }
        if let Some(pid) = args.watch_pid {
            if !pid_alive(pid) {
                break Ok("watched process ended");
            }
        }
        if let Some(c) = control.as_mut() {
            for line in c.lines() {
                match apply(&line, &mut specs, &emu, args.mtu, args.trace_bin) {
                    Ok(what) => eprintln!("braid emulate: {what}"),
                    Err(e) => eprintln!("braid emulate: control: {line:?}: {e:#}"),
                }
            }
        }
        if let (Some(at), Some(every)) = (next_report, args.every) {
            if elapsed >= at {
                print_counters(&emu, elapsed);
                next_report = Some(at + every);
            }
        }
    };
    let elapsed = braid::clock::now() - started;
    if args.every.is_some() {
        print_counters(&emu, elapsed);
    }
    let result = emu.stop();
    drop(control);
    // A direction's own error (the device failed) says more than the
    // check that noticed it, so it comes first.
    let [ab, ba] = result.context("emulated link failed")?;
    let reason = reason.context("emulated link stopped")?;
    eprintln!(
        "braid emulate: stopped ({reason}) after {:.1} s; a>b delivered {} packets ({} B), {} queue drops, {} lost; b>a delivered {} packets ({} B), {} queue drops, {} lost",
        elapsed.as_secs_f64(),
        ab.delivered_packets,
        ab.delivered_bytes,
        ab.queue_drops,
        ab.random_losses,
        ba.delivered_packets,
        ba.delivered_bytes,
        ba.queue_drops,
        ba.random_losses
    );
    Ok(())
}

/// `at` (on braid's time line) as CLOCK_MONOTONIC nanoseconds, the clock
/// every namespace of this machine shares, so that measurements taken in
/// the namespaces (testbed/udp-probe.py) can be aligned with the model's time
/// (a trace's first bin). Accurate to the time between two clock reads.
fn monotonic_ns_of(at: braid_core::Instant) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is. This is a
    // report of where braid's clock sits on the system clock, not a second
    // clock for the model.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let mono_now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let since = braid::clock::now() - at;
    mono_now.saturating_sub(since.as_nanos())
}

fn print_counters(emu: &Emulator, elapsed: Duration) {
    let line = serde_json::json!({
        "t_s": elapsed.as_secs_f64(),
        "a_to_b": emu.counters(Direction::AtoB),
        "b_to_a": emu.counters(Direction::BtoA),
    });
    println!("{line}");
}

/// Applies one control line; says what changed.
fn apply(
    line: &str,
    specs: &mut [DirSpec; 2],
    emu: &Emulator,
    mtu: u32,
    bin: Duration,
) -> anyhow::Result<String> {
    let (key, value) = line
        .split_once(char::is_whitespace)
        .map(|(k, v)| (k.trim(), v.trim()))
        .context("expected `KEY VALUE` (e.g. `rate 40mbit`)")?;
    let (back_only, key) = match key.strip_prefix("back-") {
        Some(k) => (true, k),
        None => (false, key),
    };
    let dirs: &[usize] = if back_only { &[1] } else { &[0, 1] };
    for &d in dirs {
        let s = &mut specs[d];
        match key {
            "rate" => {
                let r: Bandwidth = value.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
                s.capacity = load_capacity(Some(r), None, bin)?;
            }
            "trace" => s.capacity = load_capacity(None, Some(&PathBuf::from(value)), bin)?,
            "delay" => s.delay = value.parse().map_err(|e| anyhow::anyhow!("{e}"))?,
            "loss" => s.loss = parse_loss(value).map_err(anyhow::Error::msg)?,
            "queue" => s.queue = parse_queue(value).map_err(anyhow::Error::msg)?,
            _ => bail!("unknown key {key:?} (rate, trace, delay, loss, queue, and back-* of each)"),
        }
    }
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

/// The `--control` FIFO: created here, read without blocking, removed on
/// drop.
struct Control {
    path: PathBuf,
    file: std::fs::File,
    pending: Vec<u8>,
}

impl Control {
    fn create(path: &PathBuf) -> anyhow::Result<Control> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_fifo() {
                bail!(
                    "--control {}: exists and is not a FIFO; not touching it",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing stale FIFO {}", path.display()))?;
        }
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .context("--control path contains a NUL byte")?;
        // SAFETY: c is a valid C string.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("creating FIFO {}", path.display()));
        }
        // Read-write so that the FIFO never reports end-of-file when a
        // writer closes it (Linux allows O_RDWR on a FIFO).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .with_context(|| format!("opening FIFO {}", path.display()))?;
        Ok(Control {
            path: path.clone(),
            file,
            pending: Vec::new(),
        })
    }

    /// Complete lines written since the last call (at most 64 KiB pending).
    fn lines(&mut self) -> Vec<String> {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.file.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.pending.extend_from_slice(&buf[..n]);
            if self.pending.len() > 64 * 1024 {
                self.pending.clear();
            }
        }
        let mut out = Vec::new();
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if !text.is_empty() && !text.starts_with('#') {
                out.push(text);
            }
        }
        out
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
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
            parse_queue("100ms").unwrap(),
            QueueBound::Time(Duration::from_millis(100))
        );
        assert_eq!(parse_queue("150KB").unwrap(), QueueBound::Bytes(150_000));
        assert!(parse_queue("100").is_err());
        assert!(parse_queue("0ms").is_err());
        assert!(parse_queue("lots").is_err());
    }
}
