//! A running broker: the store opened, the owner task started, the HTTP
//! server listening, callbacks delivered.
//!
//! [`Broker::start`] takes a bound listener (tests bind `127.0.0.1:0`),
//! [`Broker::start_with`] also [`Options`] (enforcement, the HTTP bounds of
//! [`crate::http`]);
//! [`Broker::stop`] stops the owner task (which closes the store after its
//! last group commit) and the server.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::api::{router, AppState};
use crate::auth::Auth;
use crate::config::Config;
use crate::enforce::Enforcer;
use crate::http::HttpLimits;
use crate::owner::{self, StartError, CALLBACK_QUEUE};
use crate::store::Store;

/// How long one callback post may take.
pub use crate::callbacks::CALLBACK_TIMEOUT;

/// Why a broker did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The store or the restore failed.
    #[error(transparent)]
    Start(#[from] StartError),
    /// A peer's client could not be made.
    #[error(transparent)]
    Peers(crate::peers::PeerError),
    /// `--enforce` cannot work here (one line saying what is missing).
    #[error(transparent)]
    Enforce(#[from] crate::enforce::EnforceError),
    /// The HTTP bounds cannot work.
    #[error(transparent)]
    Limits(#[from] crate::http::LimitsError),
    /// The listener failed.
    #[error("listening: {0}")]
    Io(#[from] std::io::Error),
}

/// A running broker.
#[derive(Debug)]
pub struct Broker {
    addr: SocketAddr,
    server: JoinHandle<()>,
    owner: JoinHandle<()>,
    callbacks: JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stop_http: Option<tokio::sync::oneshot::Sender<()>>,
}

/// How a broker runs: [`Broker::start_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Enforce provisioned reservations in the kernel (`--enforce`).
    pub enforce: bool,
    /// The HTTP server's bounds.
    pub http: HttpLimits,
}

impl Broker {
    /// Opens `db` (a SQLite path or a `postgres://` URL), restores the book
    /// and serves the API on `listener`.
    ///
    /// # Errors
    /// [`BrokerError`].
    pub async fn start(
        config: Config,
        db: &str,
        listener: tokio::net::TcpListener,
    ) -> Result<Broker, BrokerError> {
        Broker::start_with(config, db, listener, Options::default()).await
    }

    /// [`Broker::start`] with `options`: enforcement, and the HTTP
    /// server's bounds (`max_connections` lowered to what the process's
    /// file-descriptor limit leaves).
    ///
    /// # Errors
    /// [`BrokerError::Limits`] for bounds that cannot work, else as
    /// [`Broker::start_enforcing`] or [`Broker::start`].
    pub async fn start_with(
        config: Config,
        db: &str,
        listener: tokio::net::TcpListener,
        options: Options,
    ) -> Result<Broker, BrokerError> {
        let limits = options.http.fitted(crate::http::fd_limit())?;
        let enforcer = if options.enforce {
            Some(Enforcer::new(&config)?)
        } else {
            None
        };
        Broker::launch(config, db, listener, enforcer, limits).await
    }

    /// [`Broker::start`], enforcing provisioned reservations in the kernel
    /// (htb classes and u32 filters, CPU cgroups; `braid broker
    /// --enforce`, as root): checks what that needs first, and reconciles
    /// the kernel with the stored reservations before serving.
    ///
    /// # Errors
    /// [`BrokerError::Enforce`] saying what is missing, else as
    /// [`Broker::start`].
    pub async fn start_enforcing(
        config: Config,
        db: &str,
        listener: tokio::net::TcpListener,
    ) -> Result<Broker, BrokerError> {
        let options = Options {
            enforce: true,
            ..Options::default()
        };
        Broker::start_with(config, db, listener, options).await
    }

    async fn launch(
        config: Config,
        db: &str,
        listener: tokio::net::TcpListener,
        enforcer: Option<Enforcer>,
        limits: HttpLimits,
    ) -> Result<Broker, BrokerError> {
        let addr = listener.local_addr()?;
        let store = Store::open(db).await.map_err(StartError::from)?;
        let (callback_tx, callback_rx) = mpsc::channel(CALLBACK_QUEUE);
        let callbacks = tokio::spawn(crate::callbacks::deliver(
            callback_rx,
            Arc::new(config.callbacks.clone()),
        ));
        let (stop, stop_rx) = tokio::sync::oneshot::channel();
        let (handle, owner) =
            owner::start(&config, store, Some(callback_tx), enforcer, stop_rx).await?;
        let peers = crate::peers::Peers::new(&config).map_err(BrokerError::Peers)?;
        let state = AppState {
            peers: Arc::new(peers),
            handle,
            auth: Arc::new(Auth::new(&config.secret)),
            sse_slots: Arc::new(tokio::sync::Semaphore::new(limits.max_event_streams)),
            config: Arc::new(config),
        };
        let app = router(state);
        let (stop_http, stop_http_rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(crate::http::serve(listener, app, limits, stop_http_rx));
        tracing::info!(%addr, max_connections = limits.max_connections, "broker listening");
        Ok(Broker {
            addr,
            server,
            owner,
            callbacks,
            stop: Some(stop),
            stop_http: Some(stop_http),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until the owner task ends (it only does on a storage failure
    /// or [`Broker::stop`]).
    pub async fn wait(&mut self) {
        let _ = (&mut self.owner).await;
    }

    /// Stops: the owner task finishes its batch and closes the store, then
    /// the server stops accepting.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.owner).await;
        // The server closes every connection it holds, then stops.
        if let Some(stop) = self.stop_http.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.server).await;
        self.callbacks.abort();
    }
}
