//! One module per subcommand.

pub mod access;
pub mod broker;
pub mod demo;
pub mod emulate;
pub mod eval;
pub mod keygen;
pub mod limits;
pub mod metrics;
pub mod perf;
pub mod pipe_security;
pub mod quota;
pub mod recv;
pub mod relay;
pub mod reserve;
pub mod send;
pub mod send_deadline;
pub mod send_reserve;
pub mod serve;
pub mod sim;
pub mod sim_rudp;
pub mod sim_session;
pub mod sim_tables;
pub mod stream;
pub mod view;

/// The tokio runtime `stream`, `serve` and `broker` run on: two workers,
/// I/O and timers (`relay` and `perf` run on one thread: one driver task
/// each, see there).
///
/// # Errors
/// The OS refused the runtime's threads or I/O driver.
pub fn session_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}
