//! The owner task: the one place that holds the reservation [`Book`] and the
//! [`Store`], runs the book's timers, and answers the HTTP handlers.
//!
//! Handlers send a [`Command`] over a bounded channel ([`REQUEST_QUEUE`];
//! a full queue is answered 503 at once) with a oneshot for the reply. The
//! task takes up to [`MAX_BATCH`] commands at a time, applies them to the
//! book in order, writes every reservation they changed in one transaction
//! (group commit), and only then replies and announces the changes
//! ([`BrokerEvent`] on a bounded broadcast, and callbacks). A store failure
//! is fatal: the batch is answered with an error and the task stops, so no
//! client is ever told of a change that is not on disk (crash-only: restart
//! the broker, which reloads the store).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use braid_core::reserve::{
    Book, BookConfig, Event, Modify, Owner, Reservation, ReserveError, ReserveRequest,
};
use braid_core::{Bandwidth, Instant, ReservationId};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::catalog::{Catalog, CatalogError, Change};

use crate::clock;
use crate::config::Config;
use crate::enforce::{self, Binding, EnforceError, Enforcer};
use crate::groups::{self, GroupError, Groups};
use crate::store::{Record, Store, StoreError};
use crate::types::{EventView, RemotePart, ReservationView};

/// Commands waiting for the owner task; beyond this a request gets 503.
pub const REQUEST_QUEUE: usize = 1024;
/// Commands applied (and written) together in one group commit.
pub const MAX_BATCH: usize = 256;
/// Events kept for slow `/v1/events` listeners; a listener further behind
/// is told how many it missed.
pub const EVENT_BUFFER: usize = 1024;
/// Callback posts waiting for delivery; beyond this they are dropped.
pub const CALLBACK_QUEUE: usize = 1024;
/// The most reservations one list answer carries.
pub const MAX_LIST: i64 = 10_000;

/// What a reservation request does to an existing reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Commit the held version.
    Commit,
    /// Abort the held version.
    Abort,
    /// Provision (enforce) it.
    Provision,
    /// Release it.
    Release,
    /// Terminate it.
    Terminate,
}

impl Action {
    /// `commit`, `abort`, `provision`, `release` or `terminate`: the
    /// action's name in the HTTP API and in `braid reserve`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Commit => "commit",
            Action::Abort => "abort",
            Action::Provision => "provision",
            Action::Release => "release",
            Action::Terminate => "terminate",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Who asks: `user` limits what they see to their own; `None` is an
/// operator.
pub type Viewer = Option<String>;

/// A request to the owner task.
#[derive(Debug)]
pub enum Command {
    /// Hold one reservation per request, all or none.
    Reserve {
        /// One per resource.
        requests: Vec<ReserveRequest>,
        /// Where state changes are posted.
        callback: Option<String>,
        /// What they are enforced on.
        binding: Option<Binding>,
        /// The answer: the reservations made.
        reply: oneshot::Sender<Reply>,
    },
    /// Commit, abort, provision, release or terminate.
    Act {
        /// The reservation.
        id: ReservationId,
        /// What to do.
        action: Action,
        /// Who asks.
        viewer: Viewer,
        /// The answer: the reservation after it.
        reply: oneshot::Sender<Reply>,
    },
    /// Modify: hold a new version.
    Modify {
        /// The reservation.
        id: ReservationId,
        /// The change.
        modify: Modify,
        /// Who asks.
        viewer: Viewer,
        /// The answer: the reservation with its held version.
        reply: oneshot::Sender<Reply>,
    },
    /// One reservation, live or finished.
    Get {
        /// The reservation.
        id: ReservationId,
        /// Who asks.
        viewer: Viewer,
        /// The answer.
        reply: oneshot::Sender<Reply>,
    },
    /// Reservations: the live ones, or with `all` every one stored.
    List {
        /// Who asks.
        viewer: Viewer,
        /// Include finished ones (from the store).
        all: bool,
        /// The answer.
        reply: oneshot::Sender<Reply>,
    },
    /// A co-reservation group: its parts, or commit / abort / terminate
    /// them all.
    Group {
        /// The group id.
        group: ReservationId,
        /// `None` to show it.
        action: Option<Action>,
        /// Who asks.
        viewer: Viewer,
        /// The answer: every part.
        reply: oneshot::Sender<Reply>,
    },
    /// Records the parts a peer holds for the local reservation `id` (a
    /// group's first part), written with the next group commit.
    Link {
        /// The local reservation.
        id: ReservationId,
        /// Its parts at peers.
        parts: Vec<RemotePart>,
        /// The answer: the reservation.
        reply: oneshot::Sender<Reply>,
    },
    /// An operator's change to the resources or the policy.
    Operate {
        /// The change.
        change: Change,
        /// The answer: nothing (read [`Handle::catalog`]).
        reply: oneshot::Sender<Reply>,
    },
    /// The largest rate free on a resource over an interval.
    Availability {
        /// The resource.
        resource: String,
        /// From.
        start: Instant,
        /// To.
        end: Instant,
        /// The answer.
        reply: oneshot::Sender<Reply>,
    },
}

/// What the owner task answers.
#[derive(Debug)]
pub enum Answer {
    /// Reservations.
    Many(Vec<ReservationView>),
    /// A rate.
    Rate(Bandwidth),
}

/// A refused command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerError {
    /// No such reservation for this viewer.
    #[error("no reservation {0}")]
    NotFound(u64),
    /// The book refused.
    #[error(transparent)]
    Book(#[from] ReserveError),
    /// An operator's change was refused.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A co-reservation group refused as a whole.
    #[error(transparent)]
    Group(#[from] GroupError),
    /// The flow overlaps what a live reservation covers.
    #[error(transparent)]
    Flow(#[from] crate::scope::FlowConflict),
    /// The store failed; the broker stops.
    #[error("storage failed: {0}")]
    Store(String),
    /// The request queue is full.
    #[error("the broker is busy; retry")]
    Busy,
    /// The owner task has stopped.
    #[error("the broker is stopping")]
    Stopped,
}

/// The answer to one command.
pub type Reply = Result<Answer, OwnerError>;

/// A state change, for `/v1/events`.
#[derive(Debug, Clone)]
pub struct BrokerEvent {
    /// The reservation's owner (only they and operators see it).
    pub user: String,
    /// What happened.
    pub view: EventView,
}

/// The handlers' side of the owner task.
#[derive(Debug, Clone)]
pub struct Handle {
    tx: mpsc::Sender<Command>,
    events: broadcast::Sender<Arc<BrokerEvent>>,
    catalog: watch::Receiver<Arc<Catalog>>,
}

impl Handle {
    /// Sends the command `make` builds and waits for its answer.
    ///
    /// # Errors
    /// [`OwnerError::Busy`] at once when the queue is full, else the
    /// command's error.
    pub async fn call(&self, make: impl FnOnce(oneshot::Sender<Reply>) -> Command) -> Reply {
        let (reply, rx) = oneshot::channel();
        self.tx.try_send(make(reply)).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => OwnerError::Busy,
            mpsc::error::TrySendError::Closed(_) => OwnerError::Stopped,
        })?;
        rx.await.map_err(|_| OwnerError::Stopped)?
    }

    /// The resources and policy in force (operators change them).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
    }

    /// A new listener for state changes.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<BrokerEvent>> {
        self.events.subscribe()
    }
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored operator setting does not apply.
    #[error("stored operator settings: {0}")]
    Catalog(CatalogError),
    /// Enforcement could not be set up (`--enforce`).
    #[error(transparent)]
    Enforce(#[from] EnforceError),
    /// The enforcement thread panicked at start.
    #[error("enforcement set-up panicked")]
    EnforcerPanicked,
    /// A stored reservation does not fit the configured resources.
    #[error(
        "stored reservation {id} cannot be restored: {source} (was a resource removed or shrunk?)"
    )]
    Restore {
        /// The reservation.
        id: u64,
        /// Why.
        source: ReserveError,
    },
}

/// The owner task's state.
struct OwnerTask {
    book: Book,
    store: Store,
    callbacks: BTreeMap<ReservationId, String>,
    bindings: BTreeMap<ReservationId, Binding>,
    enforcer: Option<Enforcer>,
    /// Reservations changed outside a step (enforcement failures at
    /// start), written by the next one.
    carry: BTreeSet<ReservationId>,
    events: broadcast::Sender<Arc<BrokerEvent>>,
    callback_tx: Option<mpsc::Sender<(String, EventView)>>,
    /// Co-reservation groups of live reservations.
    groups: Groups,
    /// Groups made in this step, written with its reservations:
    /// (part, group).
    new_groups: Vec<(ReservationId, ReservationId)>,
    /// Parts held at peer brokers, by local reservation (a group's first
    /// part).
    remote: BTreeMap<ReservationId, Vec<RemotePart>>,
    /// Links made in this step, written with its reservations.
    new_links: Vec<(ReservationId, RemotePart)>,
    /// The resources and policy in force, published to the handlers.
    catalog: Catalog,
    catalog_tx: watch::Sender<Arc<Catalog>>,
}

/// Loads the book from `store` (committed and held reservations as they
/// were; holds that ran out while the broker was down time out now) and
/// spawns the owner task. With an `enforcer` (`--enforce`), first brings
/// the kernel in line with the provisioned reservations
/// ([`Enforcer::reconcile`]).
///
/// # Errors
/// [`StartError`].
pub async fn start(
    config: &Config,
    store: Store,
    callback_tx: Option<mpsc::Sender<(String, EventView)>>,
    enforcer: Option<Enforcer>,
    stop: oneshot::Receiver<()>,
) -> Result<(Handle, tokio::task::JoinHandle<()>), StartError> {
    let first_id = store.max_id().await?.saturating_add(1);
    let mut book = Book::new(BookConfig {
        hold_time: config.hold_time,
        first_id,
        policy: config.policy.clone(),
        ..BookConfig::default()
    });
    for r in &config.resources {
        book.add_resource(&r.name, r.capacity)
            .map_err(|source| StartError::Restore { id: 0, source })?;
    }
    let mut catalog = Catalog {
        resources: config.resources.clone(),
        policy: config.policy.clone(),
    };
    crate::catalog::load(&store, &mut book, &mut catalog)
        .await
        .map_err(StartError::Catalog)?;
    let (catalog_tx, catalog_rx) = watch::channel(Arc::new(catalog.clone()));
    let mut callbacks = BTreeMap::new();
    for (r, callback) in store.live().await? {
        let id = r.id;
        book.restore(r)
            .map_err(|source| StartError::Restore { id: id.0, source })?;
        if let Some(c) = callback {
            callbacks.insert(id, c);
        }
    }
    let groups = crate::groups::load(&store).await?;
    let mut remote: BTreeMap<ReservationId, Vec<RemotePart>> = BTreeMap::new();
    for (local, part) in store.peer_parts().await? {
        remote.entry(local).or_default().push(part);
    }
    let bindings = store.bindings().await?;
    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
    let mut owner = OwnerTask {
        book,
        store,
        callbacks,
        bindings,
        enforcer: None,
        carry: BTreeSet::new(),
        events: events.clone(),
        callback_tx,
        groups,
        new_groups: Vec::new(),
        remote,
        new_links: Vec::new(),
        catalog,
        catalog_tx,
    };
    // Holds that ran out while the broker was down time out now, on disk
    // before the first request is answered.
    owner.step(Vec::new()).await.map_err(StartError::Store)?;
    if let Some(mut enforcer) = enforcer {
        let wants = owner
            .book
            .reservations()
            .filter_map(|r| {
                let share = owner.book.share(r.id);
                Some((r.id, enforce::want(r, owner.bindings.get(&r.id), share)?))
            })
            .collect();
        let (enforcer, failed) = tokio::task::spawn_blocking(move || {
            enforcer.reconcile(&wants).map(|failed| (enforcer, failed))
        })
        .await
        .map_err(|_| StartError::EnforcerPanicked)??;
        owner.enforcer = Some(enforcer);
        let now = clock::now();
        for (id, e) in failed {
            if owner.fail(id, &e, now) {
                owner.carry.insert(id);
            }
        }
        // The failures, on disk before the first request is answered.
        owner.step(Vec::new()).await.map_err(StartError::Store)?;
    }
    let task = tokio::spawn(owner.run(rx, stop));
    Ok((
        Handle {
            tx,
            events,
            catalog: catalog_rx,
        },
        task,
    ))
}

impl OwnerTask {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>, mut stop: oneshot::Receiver<()>) {
        loop {
            let wake = self.book.poll_timeout().map(|t| {
                let now = clock::now();
                std::time::Duration::from_nanos(t.saturating_duration_since(now).as_nanos())
            });
            let mut batch = Vec::new();
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(c) => batch.push(c),
                    None => break,
                },
                () = sleep(wake) => {}
                _ = &mut stop => break,
            }
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(c) => batch.push(c),
                    Err(_) => break,
                }
            }
            if let Err(e) = self.step(batch).await {
                tracing::error!(error = %e, "storage failed; the broker stops");
                break;
            }
        }
        self.store.close().await;
    }

    /// Runs due timers, applies `batch`, writes what changed, then replies
    /// and announces.
    async fn step(&mut self, batch: Vec<Command>) -> Result<(), StoreError> {
        let now = clock::now();
        self.book.handle_timeout(now);
        let mut dirty = std::mem::take(&mut self.carry);
        let mut shares = Vec::new();
        self.drain_events(&mut dirty, &mut shares);
        let mut replies = Vec::with_capacity(batch.len());
        for cmd in batch {
            let (reply, answer) = self.apply(cmd, now, &mut dirty).await;
            replies.push((reply, answer));
            self.drain_events(&mut dirty, &mut shares);
        }
        // Kernel state before the store: a crash in between leaves state
        // that the restarted broker's reconcile removes or keeps.
        // A background reservation whose share changed is re-enforced at
        // it, though nothing stored about it changed.
        let reshared: BTreeSet<ReservationId> = shares.iter().map(|(id, ..)| *id).collect();
        self.enforce(&reshared, &mut dirty, now).await;
        self.drain_events(&mut dirty, &mut shares);
        let changed: Vec<Reservation> = dirty
            .iter()
            .filter_map(|id| self.book.reservation(*id).cloned())
            .collect();
        let rows: Vec<Record<'_>> = changed
            .iter()
            .map(|r| Record {
                reservation: r,
                callback: self.callbacks.get(&r.id).map(String::as_str),
                binding: self.bindings.get(&r.id),
            })
            .collect();
        let new_groups = std::mem::take(&mut self.new_groups);
        let new_links = std::mem::take(&mut self.new_links);
        if let Err(e) = self.store.write_batch(&rows, &new_groups, &new_links).await {
            for (reply, _) in replies {
                let _ = reply.send(Err(OwnerError::Store(e.to_string())));
            }
            return Err(e);
        }
        for (reply, answer) in replies {
            // The requester may have gone away; the change stands.
            let _ = reply.send(answer);
        }
        for r in &changed {
            let view = EventView {
                event: "changed".into(),
                id: r.id.0,
                reservation: Some(
                    ReservationView::new(r, self.book.share(r.id)).bound(self.bindings.get(&r.id)),
                ),
                share: None,
            };
            self.announce(&r.owner.user, r.id, view);
            if !r.life.is_created() {
                self.callbacks.remove(&r.id);
                self.bindings.remove(&r.id);
            }
        }
        for (id, user, share) in shares {
            let view = EventView {
                event: "share".into(),
                id: id.0,
                reservation: None,
                share: Some(share.to_string()),
            };
            self.announce(&user, id, view);
        }
        if !changed.is_empty() {
            self.groups.prune(&self.book);
            let book = &self.book;
            self.remote.retain(|id, _| book.reservation(*id).is_some());
        }
        Ok(())
    }

    /// Brings the kernel in line with the reservations in `dirty` and
    /// the background ones in `reshared`; a
    /// reservation that cannot be enforced fails (and is added to `dirty`
    /// if it was not there).
    async fn enforce(
        &mut self,
        reshared: &BTreeSet<ReservationId>,
        dirty: &mut BTreeSet<ReservationId>,
        now: Instant,
    ) {
        let Some(mut enforcer) = self.enforcer.take() else {
            return;
        };
        let wants: Vec<_> = dirty
            .union(reshared)
            .map(|id| {
                let r = self.book.reservation(*id);
                let share = self.book.share(*id);
                (
                    *id,
                    r.and_then(|r| enforce::want(r, self.bindings.get(id), share)),
                )
            })
            .collect();
        let joined = tokio::task::spawn_blocking(move || {
            let failed: Vec<_> = wants
                .iter()
                .filter_map(|(id, w)| enforcer.apply(*id, w.as_ref()).err().map(|e| (*id, e)))
                .collect();
            (enforcer, failed)
        })
        .await;
        let Ok((enforcer, failed)) = joined else {
            tracing::error!("the enforcement thread panicked; enforcement stops");
            return;
        };
        self.enforcer = Some(enforcer);
        for (id, e) in failed {
            if self.fail(id, &e, now) {
                dirty.insert(id);
            }
        }
    }

    /// Fails reservation `id` because enforcing it failed; whether its
    /// life changed.
    fn fail(&mut self, id: ReservationId, e: &EnforceError, now: Instant) -> bool {
        tracing::error!(id = id.0, error = %e, "enforcing the reservation failed; it fails");
        self.book.fail(id, now).is_ok()
    }

    fn announce(&self, user: &str, id: ReservationId, view: EventView) {
        if let (Some(url), Some(tx)) = (self.callbacks.get(&id), &self.callback_tx) {
            if tx.try_send((url.clone(), view.clone())).is_err() {
                tracing::warn!(id = id.0, "callback queue full; event dropped");
            }
        }
        // No listener is fine.
        let _ = self.events.send(Arc::new(BrokerEvent {
            user: user.to_string(),
            view,
        }));
    }

    fn drain_events(
        &mut self,
        dirty: &mut BTreeSet<ReservationId>,
        shares: &mut Vec<(ReservationId, String, Bandwidth)>,
    ) {
        while let Some(e) = self.book.poll_event() {
            match e {
                Event::HoldTimedOut { id, .. } | Event::PassedEndTime { id } => {
                    dirty.insert(id);
                }
                Event::Share { id, share, .. } => {
                    if let Some(r) = self.book.reservation(id) {
                        shares.push((id, r.owner.user.clone(), share));
                    }
                }
            }
        }
    }

    /// The reservation `id` if `viewer` may see it.
    fn visible(&self, id: ReservationId, viewer: &Viewer) -> Result<&Reservation, OwnerError> {
        match self.book.reservation(id) {
            Some(r) if viewer.as_ref().is_none_or(|u| *u == r.owner.user) => Ok(r),
            _ => Err(OwnerError::NotFound(id.0)),
        }
    }

    fn view(&self, id: ReservationId) -> Answer {
        Answer::Many(self.view_one(id).into_iter().collect())
    }

    fn view_one(&self, id: ReservationId) -> Option<ReservationView> {
        let group = self.groups.group_of(id);
        self.book.reservation(id).map(|r| {
            ReservationView {
                group: group.map(|g| g.0),
                remote: self
                    .remote
                    .get(&group.unwrap_or(id))
                    .cloned()
                    .unwrap_or_default(),
                ..ReservationView::new(r, self.book.share(id))
            }
            .bound(self.bindings.get(&id))
        })
    }

    async fn apply(
        &mut self,
        cmd: Command,
        now: Instant,
        dirty: &mut BTreeSet<ReservationId>,
    ) -> (oneshot::Sender<Reply>, Reply) {
        match cmd {
            Command::Reserve {
                requests,
                callback,
                binding,
                reply,
            } => {
                if let Some(e) = self.flow_conflict(&requests, binding.as_ref()) {
                    return (reply, Err(e.into()));
                }
                let mut made = Vec::new();
                for req in requests {
                    match self.book.reserve(req, now) {
                        Ok(id) => made.push(id),
                        Err(e) => {
                            // All or none: release what this request held.
                            for id in made {
                                let _ = self.book.abort(id, now);
                            }
                            return (reply, Err(e.into()));
                        }
                    }
                }
                if made.len() > 1 {
                    if let Some(g) = self.groups.insert(made.clone()) {
                        self.new_groups.extend(made.iter().map(|p| (*p, g)));
                    }
                }
                let mut views = Vec::new();
                for id in made {
                    dirty.insert(id);
                    if let Some(c) = &callback {
                        self.callbacks.insert(id, c.clone());
                    }
                    if let Some(b) = &binding {
                        self.bindings.insert(id, b.clone());
                    }
                    if let Answer::Many(v) = self.view(id) {
                        views.extend(v);
                    }
                }
                (reply, Ok(Answer::Many(views)))
            }
            Command::Act {
                id,
                action,
                viewer,
                reply,
            } => {
                if let Err(e) = self.visible(id, &viewer) {
                    return (reply, Err(e));
                }
                if let Some(group) = self.groups.group_of(id) {
                    if action != Action::Provision && action != Action::Release {
                        let answer = self
                            .group_act(group, id, action, now, dirty)
                            .map(|()| self.view(id));
                        return (reply, answer);
                    }
                }
                let done = match action {
                    Action::Commit => self.book.commit(id, now),
                    Action::Abort => self.book.abort(id, now),
                    Action::Provision => self.book.provision(id, now),
                    Action::Release => self.book.release(id, now),
                    Action::Terminate => self.book.terminate(id, now),
                };
                match done {
                    Ok(()) => {
                        dirty.insert(id);
                        (reply, Ok(self.view(id)))
                    }
                    Err(e) => (reply, Err(e.into())),
                }
            }
            Command::Modify {
                id,
                modify,
                viewer,
                reply,
            } => {
                if let Err(e) = self.visible(id, &viewer) {
                    return (reply, Err(e));
                }
                match self.book.modify(id, modify, now) {
                    Ok(_) => {
                        dirty.insert(id);
                        (reply, Ok(self.view(id)))
                    }
                    Err(e) => (reply, Err(e.into())),
                }
            }
            Command::Get { id, viewer, reply } => {
                if self.visible(id, &viewer).is_ok() {
                    return (reply, Ok(self.view(id)));
                }
                // Finished long ago: only the store remembers it.
                let answer = match self.store.get(id).await {
                    Ok(Some(r)) if viewer.as_ref().is_none_or(|u| *u == r.owner.user) => {
                        Ok(Answer::Many(vec![ReservationView::new(&r, None)]))
                    }
                    Ok(_) => Err(OwnerError::NotFound(id.0)),
                    Err(e) => Err(OwnerError::Store(e.to_string())),
                };
                (reply, answer)
            }
            Command::List { viewer, all, reply } => {
                if all {
                    let answer = self
                        .store
                        .all(viewer.as_deref(), MAX_LIST)
                        .await
                        .map(|rs| {
                            Answer::Many(
                                rs.iter()
                                    .map(|r| {
                                        let r = self.book.reservation(r.id).unwrap_or(r);
                                        ReservationView::new(r, self.book.share(r.id))
                                    })
                                    .collect(),
                            )
                        })
                        .map_err(|e| OwnerError::Store(e.to_string()));
                    return (reply, answer);
                }
                let views = self
                    .book
                    .reservations()
                    .filter(|r| viewer.as_ref().is_none_or(|u| *u == r.owner.user))
                    .map(|r| {
                        ReservationView::new(r, self.book.share(r.id))
                            .bound(self.bindings.get(&r.id))
                    })
                    .collect();
                (reply, Ok(Answer::Many(views)))
            }
            Command::Group {
                group,
                action,
                viewer,
                reply,
            } => (reply, self.group(group, action, viewer, now, dirty)),
            Command::Operate { change, reply } => {
                let done =
                    crate::catalog::apply(&self.store, &mut self.book, &mut self.catalog, change)
                        .await;
                if done.is_ok() {
                    self.catalog_tx.send_replace(Arc::new(self.catalog.clone()));
                }
                (
                    reply,
                    done.map(|()| Answer::Many(Vec::new())).map_err(Into::into),
                )
            }
            Command::Link { id, parts, reply } => {
                if self.book.reservation(id).is_none() {
                    return (reply, Err(OwnerError::NotFound(id.0)));
                }
                self.new_links.extend(parts.iter().map(|p| (id, p.clone())));
                self.remote.entry(id).or_default().extend(parts);
                // Written with this step's transaction even if nothing
                // else changed.
                dirty.insert(id);
                (reply, Ok(self.view(id)))
            }
            Command::Availability {
                resource,
                start,
                end,
                reply,
            } => (
                reply,
                self.book
                    .max_free(&resource, start.max(now), end)
                    .map(Answer::Rate)
                    .map_err(OwnerError::from),
            ),
        }
    }
}

impl OwnerTask {
    /// Whether the flow of `binding` overlaps, on a resource `requests`
    /// name, what a live reservation covers in a way [`crate::scope`]
    /// refuses.
    fn flow_conflict(
        &self,
        requests: &[ReserveRequest],
        binding: Option<&Binding>,
    ) -> Option<crate::scope::FlowConflict> {
        let flow = binding?.flow.as_ref()?;
        requests.iter().find_map(|req| {
            let borrow = self
                .catalog
                .resource(&req.resource)
                .and_then(|r| r.borrow)
                .unwrap_or(true);
            let others = self
                .book
                .reservations()
                .map(|r| (r, self.bindings.get(&r.id)));
            crate::scope::conflict(flow, &req.owner.user, &req.resource, borrow, others)
        })
    }

    /// `Command::Group`: shows the group, or acts on every part.
    fn group(
        &mut self,
        group: ReservationId,
        action: Option<Action>,
        viewer: Viewer,
        now: Instant,
        dirty: &mut BTreeSet<ReservationId>,
    ) -> Reply {
        let missing = || OwnerError::Group(GroupError::NotFound(group.0));
        if self.groups.group_of(group) != Some(group) || self.visible(group, &viewer).is_err() {
            return Err(missing());
        }
        if let Some(action) = action {
            self.group_act(group, group, action, now, dirty)?;
        }
        let parts = self.groups.parts(group).ok_or_else(missing)?;
        Ok(Answer::Many(
            parts.iter().filter_map(|p| self.view_one(*p)).collect(),
        ))
    }

    /// Commits, aborts or terminates every part of `group` (`asked` is
    /// the part the client named); every part changed is marked dirty, so
    /// they are all written in this step's one transaction.
    fn group_act(
        &mut self,
        group: ReservationId,
        asked: ReservationId,
        action: Action,
        now: Instant,
        dirty: &mut BTreeSet<ReservationId>,
    ) -> Result<(), OwnerError> {
        let parts = self.groups.parts(group).unwrap_or(&[]).to_vec();
        let done = match action {
            Action::Commit => {
                groups::commit(&mut self.book, group, &parts, now).map_err(|e| match e {
                    groups::CommitError::Group(g) => OwnerError::Group(g),
                    groups::CommitError::Book(b) => OwnerError::Book(b),
                })
            }
            Action::Abort => groups::abort(&mut self.book, asked, &parts, now).map_err(Into::into),
            Action::Terminate => {
                groups::terminate(&mut self.book, asked, &parts, now).map_err(Into::into)
            }
            Action::Provision | Action::Release => {
                return Err(OwnerError::Group(GroupError::NotFound(group.0)))
            }
        };
        // A refused commit may have undone parts: write whatever changed.
        dirty.extend(parts.iter().copied());
        done.map(|_| ())
    }
}

/// Sleeps for `d`, or forever when there is no timer.
async fn sleep(d: Option<std::time::Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// A reservation request from `user` of this broker's domain.
pub fn owner(user: &str, config: &Config) -> Owner {
    Owner::new(user, config.domain.clone())
}
