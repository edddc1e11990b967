//! One module per subcommand.

pub mod demo;
pub mod emulate;
pub mod eval;
pub mod keygen;
pub mod metrics;
pub mod perf;
pub mod recv;
pub mod relay;
pub mod send;
pub mod serve;
pub mod sim;
pub mod sim_rudp;
pub mod sim_session;
pub mod sim_tables;
pub mod stream;
pub mod view;
