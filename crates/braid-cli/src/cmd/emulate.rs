//! `braid emulate`: an emulated wide-area link between two network
//! namespaces (see `braid::emulate` and docs/emulate.md). This file turns
//! flags into an [`EmulatorConfig`] and both directions' link models, then
//! hands the running link to `braid::emulate::supervise`: it ends at a
//! signal, the end of `--duration`, the end of the `--watch-pid` process or
//! a device failure, and applies lines written to the `--control` FIFO.

use anyhow::{bail, Context};
use braid::emulate::control::Control;
use braid::emulate::model::{parse_loss, LinkModel, QueueBound};
use braid::emulate::supervise::{monotonic_ns_of, pid_alive, supervise, Hooks, Supervision};
use braid::emulate::{CountersSnapshot, Emulator, EmulatorConfig, Ipv4Cidr, Side};
use braid_core::link::Capacity;
use braid_core::{Bandwidth, Duration};
use std::path::{Path, PathBuf};

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

fn parse_queue(s: &str) -> Result<QueueBound, String> {
    s.parse()
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
) -> anyhow::Result<(LinkModel, Option<LinkModel>)> {
    let scenario = braid_sim::Scenario::from_path(path)?;
    let spec_of = |name: &str| -> anyhow::Result<LinkModel> {
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
        Ok(LinkModel {
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

/// Runs `braid emulate`.
pub fn run(args: EmulateArgs) -> anyhow::Result<()> {
    if args.trace_bin.is_zero() {
        bail!("--trace-bin must be positive");
    }
    let (fwd, scenario_back) = match &args.scenario {
        Some(path) => scenario_specs(path, &args)?,
        None => (
            LinkModel {
                capacity: load_capacity(args.rate, args.trace.as_ref(), args.trace_bin)?,
                delay: args.delay,
                loss: args.loss,
                queue: args.queue,
            },
            None,
        ),
    };
    let back = LinkModel {
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
    let control = match &args.control {
        Some(p) => Some(Control::create(p).map_err(|e| anyhow::anyhow!("--control {e}"))?),
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
    let supervision = Supervision {
        duration: args.duration,
        watch_pid: args.watch_pid,
        control,
        every: args.every,
        mtu: args.mtu,
    };
    let outcome = supervise(
        &emu,
        &mut specs,
        supervision,
        &mut CliHooks {
            bin: args.trace_bin,
        },
    );
    let result = emu.stop();
    // A direction's own error (the device failed) says more than the
    // check that noticed it, so it comes first.
    let [ab, ba] = result.context("emulated link failed")?;
    let (reason, elapsed) = match outcome {
        Ok(o) => (o.ended.describe(), o.elapsed),
        Err((e, _)) => return Err(anyhow::Error::new(e).context("emulated link stopped")),
    };
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

/// The CLI's side of the supervisor: signals, the simulator's trace
/// loader, lines on stderr and counters as JSON on stdout.
struct CliHooks {
    bin: Duration,
}

impl Hooks for CliHooks {
    fn stop_requested(&mut self) -> bool {
        crate::shutdown::signalled().is_some()
    }
    fn load_trace(&self, path: &Path) -> Result<Capacity, String> {
        load_capacity(None, Some(&path.to_path_buf()), self.bin).map_err(|e| format!("{e:#}"))
    }
    fn on_control(&mut self, line: &str, outcome: Result<String, String>) {
        match outcome {
            Ok(what) => eprintln!("braid emulate: {what}"),
            Err(e) => eprintln!("braid emulate: control: {line:?}: {e}"),
        }
    }
    fn on_counters(
        &mut self,
        elapsed: Duration,
        a_to_b: CountersSnapshot,
        b_to_a: CountersSnapshot,
    ) {
        let line = serde_json::json!({
            "t_s": elapsed.as_secs_f64(),
            "a_to_b": a_to_b,
            "b_to_a": b_to_a,
        });
        println!("{line}");
    }
}
