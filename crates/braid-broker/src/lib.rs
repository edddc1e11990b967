//! `braid broker`: the reservation service (seed 004, GARA; OGF NSI
//! Connection Service v2 and ESnet OSCARS as present-day anchors).
//!
//! An HTTP/JSON API (axum) over braid-core's sans-IO reservation
//! [`braid_core::reserve::Book`]: reservations are held, then committed (or
//! aborted, or time out), provisioned and released, modified, terminated.
//! One owner task holds the book and the store and runs the timers; the
//! handlers talk to it over a bounded channel. Everything is written to the
//! store (SQLite, or PostgreSQL) before the client is answered, so a
//! restarted broker has every committed reservation and every held one with
//! its hold deadline. Clients authenticate with HS256 bearer tokens.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`config`] | the TOML configuration: resources, policy, peers, token secret |
//! | [`clock`] | the one wall-clock read; RFC 3339 times |
//! | [`store`] | SQLite / PostgreSQL storage, embedded migrations, group commit |
//! | [`auth`] | bearer tokens: issue and verify, roles |
//! | [`types`] | request and response bodies (the OpenAPI schemas) |
//! | [`owner`] | the task that owns the book and the store |
//! | [`allow`] | the operator's allow-list of callback URLs |
//! | [`callbacks`] | delivery of state changes to callback URLs, with a bounded retry |
//! | [`peers`] | peer brokers: resources of other domains, held and committed through them |
//! | [`catalog`] | the resources and policy in force; operators' changes, stored |
//! | [`scope`] | whose traffic a reservation may touch: address grants, prefix width, overlap |
//! | [`groups`] | co-reservation groups: all parts committed, aborted, terminated together |
//! | [`enforce`] | `--enforce`: htb classes + u32 filters, CPU cgroups for provisioned reservations |
//! | [`api`] | routes, handlers, errors, the OpenAPI document |
//! | [`http`] | the HTTP server's bounds: connection cap and reserve, header and body timeouts |
//! | [`server`] | [`Broker`]: a running service |
//! | [`client`] | [`Client`]: the API from Rust (`braid reserve`) |

pub mod allow;
pub mod api;
pub mod auth;
pub mod callbacks;
pub mod catalog;
pub mod client;
pub mod clock;
pub mod config;
pub mod enforce;
pub mod flow;
pub mod groups;
pub mod http;
pub mod owner;
pub mod peers;
pub mod scope;
pub mod server;
pub mod store;
pub mod transfer;
pub mod types;

pub use auth::{Auth, Role};
pub use client::Client;
pub use config::Config;
pub use server::Broker;
