//! A running broker: the store opened, the owner task started, the HTTP
//! server listening, callbacks delivered.
//!
//! [`Broker::start`] takes a bound listener (tests bind `127.0.0.1:0`);
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
        Broker::launch(config, db, listener, None).await
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
        let enforcer = Enforcer::new(&config)?;
        Broker::launch(config, db, listener, Some(enforcer)).await
    }

    async fn launch(
        config: Config,
        db: &str,
        listener: tokio::net::TcpListener,
        enforcer: Option<Enforcer>,
    ) -> Result<Broker, BrokerError> {
        let addr = listener.local_addr()?;
        let store = Store::open(db).await.map_err(StartError::from)?;
        let (callback_tx, callback_rx) = mpsc::channel(CALLBACK_QUEUE);
        let callbacks = tokio::spawn(crate::callbacks::deliver(callback_rx));
        let (stop, stop_rx) = tokio::sync::oneshot::channel();
        let (handle, owner) =
            owner::start(&config, store, Some(callback_tx), enforcer, stop_rx).await?;
        let peers = crate::peers::Peers::new(&config).map_err(BrokerError::Peers)?;
        let state = AppState {
            peers: Arc::new(peers),
            handle,
            auth: Arc::new(Auth::new(&config.secret)),
            sse_slots: Arc::new(tokio::sync::Semaphore::new(crate::api::MAX_SSE_CLIENTS)),
            config: Arc::new(config),
        };
        let app = router(state);
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the HTTP server stopped");
            }
        });
        tracing::info!(%addr, "broker listening");
        Ok(Broker {
            addr,
            server,
            owner,
            callbacks,
            stop: Some(stop),
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
        self.server.abort();
        self.callbacks.abort();
    }
}
