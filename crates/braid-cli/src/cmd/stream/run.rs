//! The running source session: producers feeding streams, upcalls
//! answered by `--on-infeasible`, the view each period, the end.

use super::config::Plan;
use super::source::Source;
use crate::cmd::view::Format;
use braid_core::Duration;
use std::net::SocketAddr;

/// Where and how often the running session is shown.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Text (view / plain lines) or JSON lines.
    pub format: Format,
    /// Prometheus endpoint.
    pub metrics: Option<SocketAddr>,
    /// Refresh period.
    pub every: Duration,
}

/// Runs the session of `plan`.
pub fn session(plan: Plan, sources: Vec<Source>, out: Output) -> anyhow::Result<()> {
    let _ = (plan, sources, out);
    anyhow::bail!("sessions on real sockets (braid::session) are not in this build yet")
}
