//! Command-line arguments (clap). Each subcommand's own flags live with the
//! subcommand in `cmd/`.

use clap::{Parser, Subcommand};

/// braid: QoS-aware data streaming over many paths.
#[derive(Debug, Parser)]
#[command(name = "braid", version, about, long_about = None)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace); BRAID_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// What braid can do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the built-in demonstration (needs no files): three streams with
    /// guarantees over two simulated paths with cross traffic, PGOS and MSFQ
    /// side by side.
    Demo(crate::cmd::demo::DemoArgs),
    /// Deterministic network simulation.
    #[command(subcommand)]
    Sim(crate::cmd::sim::SimCommand),
    /// Evaluations that reproduce the seed papers' studies.
    #[command(subcommand)]
    Eval(crate::cmd::eval::EvalCommand),
    /// Send stdin (or a file) to a `braid recv` over parallel connections.
    Send(Box<crate::cmd::send::SendArgs>),
    /// Receive a `braid send` stream and write it, in order and verified.
    Recv(crate::cmd::recv::RecvArgs),
    /// Join two network namespaces with an emulated wide-area link.
    ///
    /// For real kernels without netem. A TUN device is created in each namespace; every IP packet (TCP,
    /// MPTCP, UDP, ICMP) one side sends goes through braid's link model, the
    /// one braid-sim uses, and comes out of the other side's device:
    ///   1. a drop-tail queue bounded in bytes (--queue; a time is converted
    ///      at the mean rate);
    ///   2. serialization at --rate, or at the rate a bandwidth trace gives
    ///      over time (--trace);
    ///   3. random loss with probability --loss (seeded by --seed);
    ///   4. a one-way propagation delay of --delay.
    ///
    /// Each direction has its own model; the --back-* flags change B→A only
    /// (by default B→A is like A→B). The devices vanish when braid exits, is
    /// killed, or the --watch-pid process ends. Needs root and /dev/net/tun.
    #[command(verbatim_doc_comment)]
    Emulate(Box<crate::cmd::emulate::EmulateArgs>),
    /// Write a new pre-shared key to FILE (mode 0600) for `--key FILE`.
    Keygen(crate::cmd::keygen::KeygenArgs),
    /// The reservation service: an HTTP API holding and committing rates on
    /// network, CPU and storage resources (`braid broker token` issues
    /// its users' tokens).
    Broker(Box<crate::cmd::broker::BrokerArgs>),
    /// The reservation client: create, list, show, modify, commit, cancel
    /// and watch reservations at a `braid broker`.
    Reserve(Box<crate::cmd::reserve::ReserveArgs>),
    /// The source of a session: streams with guarantees (rate, window,
    /// best effort) from files, stdin, cbr:RATE or frame traces, over
    /// several paths (direct, via relays, from chosen interfaces) to a
    /// `braid serve`, with a live view of what each stream gets.
    Stream(Box<crate::cmd::stream::StreamArgs>),
    /// The sink of sessions: writes each stream to DIR/NAME (or counts
    /// it) and says which streams arrived complete.
    Serve(Box<crate::cmd::serve::ServeArgs>),
    /// Forward sessions' paths hop by hop, for sessions holding its key.
    Relay(Box<crate::cmd::relay::RelayArgs>),
    /// Measure one connection (braid RUDP or TCP), iperf-like.
    #[command(subcommand)]
    Perf(crate::cmd::perf::PerfCommand),
}
