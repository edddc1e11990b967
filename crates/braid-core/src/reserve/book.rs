//! The reservation book: one domain's resources, their slot tables and the
//! reservations on them (seed 004 §3's resource manager, driven like an NSI
//! provider agent).
//!
//! A [`Book`] takes requests (reserve, commit, abort, modify, provision,
//! release, terminate, fail) with the time passed in, runs each
//! reservation's three state machines ([`crate::reserve::state`]), admits by
//! capacity ([`SlotTable`]) after policy ([`Policy`]), and announces hold
//! time-outs, ends and background shares as [`Event`]s.
//!
//! Invariants: every held or committed reservation occupies its
//! [`Reservation::footprint`] on its resource's timeline and nothing else
//! does, so no resource is ever reserved beyond its capacity at any instant;
//! a refused request changes nothing.

use std::collections::{BTreeMap, VecDeque};

use crate::id::ReservationId;
use crate::reserve::class::DEFAULT_BACKGROUND_FRACTION;
use crate::reserve::error::ReserveError;
use crate::reserve::policy::{Policy, PolicyQuery, Scope};
use crate::reserve::record::{Event, Modify, Reservation, ReserveRequest, Version};
use crate::reserve::state::{
    LifeInput, LifeState, ProvisionInput, ProvisionState, ReservationInput, ReservationState,
};
use crate::reserve::timeline::{Interval, SlotTable};
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

/// How long a held version waits for its commit, as in NSI and OSCARS.
pub const DEFAULT_HOLD_TIME: Duration = Duration::from_secs(120);
/// Default bound on live (held, committed, not yet ended) reservations.
pub const DEFAULT_MAX_RESERVATIONS: usize = 100_000;
/// Bound on the event queue; when full the oldest event is dropped (and
/// counted), since a driver can always read the current state and shares.
pub const MAX_EVENTS: usize = 4096;
/// Bound on finished reservations remembered for enquiries; the oldest is
/// forgotten first (the broker keeps the history in its store).
pub const MAX_FINISHED: usize = 4096;
/// Bound on resources in one book.
pub const MAX_RESOURCES: usize = 4096;

/// How a book behaves.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BookConfig {
    /// How long a held version waits for its commit.
    pub hold_time: Duration,
    /// The part of the unused premium capacity handed to background holders
    /// (see [`crate::reserve::class`]).
    pub background_fraction: f64,
    /// The most live reservations.
    pub max_reservations: usize,
    /// The first id handed out (a restarted broker continues its sequence).
    pub first_id: u64,
    /// Admission policy.
    pub policy: Policy,
}

impl Default for BookConfig {
    fn default() -> Self {
        BookConfig {
            hold_time: DEFAULT_HOLD_TIME,
            background_fraction: DEFAULT_BACKGROUND_FRACTION,
            max_reservations: DEFAULT_MAX_RESERVATIONS,
            first_id: 1,
            policy: Policy::default(),
        }
    }
}

/// Counters, polled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BookStats {
    /// Versions admitted (first versions and modifications).
    pub admitted: u64,
    /// Requests refused for lack of capacity.
    pub refused_capacity: u64,
    /// Requests refused by policy.
    pub refused_policy: u64,
    /// Holds that ran out.
    pub timed_out: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
}

#[derive(Debug, Clone)]
struct Resource {
    table: SlotTable,
    /// The shares last announced to background holders.
    shares: BTreeMap<ReservationId, Bandwidth>,
}

/// One domain's reservation book (see the module doc).
///
/// Driving: call the request methods ([`Book::reserve`], [`Book::commit`],
/// …) with the current time; after any call, ask [`Book::poll_timeout`] when
/// to wake and call [`Book::handle_timeout`] then; drain
/// [`Book::poll_event`]. Every request first acts on the timers due by its
/// `now`, so a commit after the hold ran out is refused even if the driver
/// woke late. Time never goes back: an earlier `now` is taken as the latest
/// seen.
#[derive(Debug, Clone)]
pub struct Book {
    config: BookConfig,
    resources: BTreeMap<String, Resource>,
    live: BTreeMap<ReservationId, Reservation>,
    finished: BTreeMap<ReservationId, Reservation>,
    finished_order: VecDeque<ReservationId>,
    events: VecDeque<Event>,
    next_id: u64,
    now: Instant,
    /// At or before the earliest timer of any live reservation (a lower
    /// bound: lowered whenever a timer is set, made exact whenever timers
    /// run), [`Instant::MAX`] when none; requests arriving before it skip
    /// the scan for due timers.
    next_due: Instant,
    stats: BookStats,
}

impl Book {
    /// An empty book.
    pub fn new(config: BookConfig) -> Book {
        Book {
            next_id: config.first_id,
            config,
            resources: BTreeMap::new(),
            live: BTreeMap::new(),
            finished: BTreeMap::new(),
            finished_order: VecDeque::new(),
            events: VecDeque::new(),
            now: Instant::ZERO,
            next_due: Instant::MAX,
            stats: BookStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BookConfig {
        &self.config
    }

    /// The latest time the book has been given.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The counters.
    pub fn stats(&self) -> BookStats {
        self.stats
    }

    /// Adds a resource with `capacity` reservable.
    ///
    /// # Errors
    /// [`ReserveError::DuplicateResource`], [`ReserveError::TooManyResources`].
    pub fn add_resource(&mut self, name: &str, capacity: Bandwidth) -> Result<(), ReserveError> {
        if self.resources.contains_key(name) {
            return Err(ReserveError::DuplicateResource(name.to_string()));
        }
        if self.resources.len() >= MAX_RESOURCES {
            return Err(ReserveError::TooManyResources(MAX_RESOURCES));
        }
        let table = SlotTable::new(capacity);
        let shares = BTreeMap::new();
        self.resources
            .insert(name.to_string(), Resource { table, shares });
        Ok(())
    }

    /// Changes `name`'s reservable capacity; refused (nothing changed) if
    /// what is held or committed at some instant would no longer fit.
    ///
    /// # Errors
    /// [`ReserveError::UnknownResource`], [`ReserveError::Overbooked`].
    pub fn set_capacity(&mut self, name: &str, capacity: Bandwidth) -> Result<(), ReserveError> {
        if capacity == Bandwidth::ZERO {
            return Err(ReserveError::ZeroRate);
        }
        self.table_mut(name)?
            .set_capacity(capacity)
            .map_err(|source| ReserveError::Overbooked {
                resource: name.to_string(),
                source,
            })?;
        self.refresh_shares();
        Ok(())
    }

    /// Replaces the admission policy (for requests from now on; what is
    /// admitted stays).
    pub fn set_policy(&mut self, policy: Policy) {
        self.config.policy = policy;
    }

    /// The resources' names and capacities.
    pub fn resources(&self) -> impl Iterator<Item = (&str, Bandwidth)> + '_ {
        self.resources
            .iter()
            .map(|(n, r)| (n.as_str(), r.table.capacity()))
    }

    /// A live or recently finished reservation.
    pub fn reservation(&self, id: ReservationId) -> Option<&Reservation> {
        self.live.get(&id).or_else(|| self.finished.get(&id))
    }

    /// The live reservations (held, committed, not yet ended), by id.
    pub fn reservations(&self) -> impl Iterator<Item = &Reservation> + '_ {
        self.live.values()
    }

    /// The share a background reservation was last told (zero or `None`
    /// when it is not active).
    pub fn share(&self, id: ReservationId) -> Option<Bandwidth> {
        let r = self.live.get(&id)?;
        self.resources.get(&r.resource)?.shares.get(&id).copied()
    }

    /// The rate reserved on `resource` at `t` (held and committed).
    ///
    /// # Errors
    /// [`ReserveError::UnknownResource`].
    pub fn usage_at(&self, resource: &str, t: Instant) -> Result<Bandwidth, ReserveError> {
        Ok(self.table(resource)?.usage_at(t))
    }

    /// Enquire: the largest rate free over the whole of `[start, end)`.
    ///
    /// # Errors
    /// [`ReserveError::UnknownResource`], [`ReserveError::EndBeforeStart`].
    pub fn max_free(
        &self,
        resource: &str,
        start: Instant,
        end: Instant,
    ) -> Result<Bandwidth, ReserveError> {
        let interval =
            Interval::new(start, end).ok_or(ReserveError::EndBeforeStart { start, end })?;
        Ok(self.table(resource)?.max_free(interval))
    }

    /// Enquire: the earliest interval of `length`, starting at or after
    /// `not_before`, over which `rate` fits; `None` if `rate` is above the
    /// capacity or `length` is zero.
    ///
    /// # Errors
    /// [`ReserveError::UnknownResource`].
    pub fn earliest_fit(
        &self,
        resource: &str,
        rate: Bandwidth,
        length: Duration,
        not_before: Instant,
    ) -> Result<Option<Interval>, ReserveError> {
        Ok(self
            .table(resource)?
            .earliest_fit(rate, length, not_before.max(self.now)))
    }

    /// Reserve: checks policy and capacity and holds a first version for
    /// [`BookConfig::hold_time`]. A start at or before `now` starts now.
    ///
    /// # Errors
    /// [`ReserveError::UnknownResource`], [`ReserveError::ZeroRate`],
    /// [`ReserveError::EndInPast`], [`ReserveError::EndBeforeStart`],
    /// [`ReserveError::BookFull`], [`ReserveError::Policy`],
    /// [`ReserveError::Overbooked`]; the book is unchanged.
    pub fn reserve(
        &mut self,
        req: ReserveRequest,
        now: Instant,
    ) -> Result<ReservationId, ReserveError> {
        self.advance(now);
        let now = self.now;
        self.table(&req.resource)?;
        let start = req.start.max(now);
        let interval = self.check_times(req.rate, start, req.end)?;
        if self.live.len() >= self.config.max_reservations {
            return Err(ReserveError::BookFull(self.config.max_reservations));
        }
        let id = ReservationId(self.next_id);
        let version = Version {
            number: 0,
            start,
            end: req.end,
            rate: req.rate,
        };
        let mut r = Reservation {
            id,
            owner: req.owner,
            resource: req.resource,
            class: req.class,
            state: ReservationState::Checking,
            provision: ProvisionState::Released,
            life: LifeState::Created,
            committed: None,
            pending: Some(version),
            latest_version: 0,
            hold_expires: None,
        };
        self.admit(&r, interval, req.rate)?;
        r.state = step(id, r.state, ReservationInput::Admit, false)?;
        r.hold_expires = Some(now + self.config.hold_time);
        self.next_id += 1;
        self.live.insert(id, r);
        self.note_timers(id);
        Ok(id)
    }

    /// Modify a committed reservation's rate or end: admitted as a new held
    /// version (the old stays in force until it is committed).
    ///
    /// # Errors
    /// As [`Book::reserve`], plus [`ReserveError::UnknownReservation`],
    /// [`ReserveError::NotAlive`], [`ReserveError::EmptyModification`] and
    /// [`ReserveError::Transition`] unless committed with nothing held.
    pub fn modify(
        &mut self,
        id: ReservationId,
        m: Modify,
        now: Instant,
    ) -> Result<u32, ReserveError> {
        self.advance(now);
        let r = self.alive(id)?;
        let checking = step(id, r.state, ReservationInput::Modify, r.committed.is_some())?;
        // The reservation machine only takes Modify when committed.
        let Some(old) = r.committed else {
            return Err(ReserveError::NotCommitted(id));
        };
        let new = Version {
            number: r.latest_version.max(old.number).saturating_add(1),
            start: old.start,
            end: m.end.unwrap_or(old.end),
            rate: m.rate.unwrap_or(old.rate),
        };
        if new.end == old.end && new.rate == old.rate {
            return Err(ReserveError::EmptyModification);
        }
        let interval = self.check_times(new.rate, new.start, new.end)?;
        let mut candidate = r.clone();
        candidate.state = checking;
        candidate.pending = Some(new);
        candidate.latest_version = new.number;
        self.admit(&candidate, interval, new.rate)?;
        candidate.state = step(id, checking, ReservationInput::Admit, true)?;
        candidate.hold_expires = Some(self.now + self.config.hold_time);
        self.live.insert(id, candidate);
        self.note_timers(id);
        Ok(new.number)
    }

    /// Commit the held version: it becomes the version in force.
    ///
    /// # Errors
    /// [`ReserveError::UnknownReservation`], [`ReserveError::NotAlive`],
    /// [`ReserveError::Transition`] unless held (a hold that ran out by `now`
    /// is timed out, not held).
    pub fn commit(&mut self, id: ReservationId, now: Instant) -> Result<(), ReserveError> {
        self.advance(now);
        let r = self.alive(id)?;
        let in_force = r.committed.is_some();
        let committing = step(id, r.state, ReservationInput::Commit, in_force)?;
        let done = step(id, committing, ReservationInput::CommitDone, in_force)?;
        let r = self.live_mut(id)?;
        r.state = done;
        r.committed = r.pending.take().or(r.committed);
        r.hold_expires = None;
        let (resource, class) = (r.resource.clone(), r.class);
        self.settle_footprint(id);
        self.note_timers(id);
        self.refresh_shares_after(&resource, class);
        Ok(())
    }

    /// Abort the held version: a first version is gone, a modification
    /// leaves the old version in force.
    ///
    /// # Errors
    /// [`ReserveError::UnknownReservation`], [`ReserveError::NotAlive`],
    /// [`ReserveError::Transition`] unless held.
    pub fn abort(&mut self, id: ReservationId, now: Instant) -> Result<(), ReserveError> {
        self.advance(now);
        let r = self.alive(id)?;
        let next = step(id, r.state, ReservationInput::Abort, r.committed.is_some())?;
        self.drop_hold(id, next);
        self.note_timers(id);
        Ok(())
    }

    /// Provision: the committed reservation is to be enforced while active.
    ///
    /// # Errors
    /// [`ReserveError::UnknownReservation`], [`ReserveError::NotAlive`],
    /// [`ReserveError::NotCommitted`], [`ReserveError::Transition`] if
    /// already provisioned.
    pub fn provision(&mut self, id: ReservationId, now: Instant) -> Result<(), ReserveError> {
        self.provisioning(id, ProvisionInput::Provision, now)
    }

    /// Release: stop enforcing (the reservation stays committed).
    ///
    /// # Errors
    /// [`ReserveError::UnknownReservation`], [`ReserveError::NotAlive`],
    /// [`ReserveError::Transition`] if not provisioned.
    pub fn release(&mut self, id: ReservationId, now: Instant) -> Result<(), ReserveError> {
        self.provisioning(id, ProvisionInput::Release, now)
    }

    /// Terminate: the reservation ends now, whatever it holds; a finished
    /// one (past its end, failed) is marked terminated.
    ///
    /// # Errors
    /// [`ReserveError::UnknownReservation`], [`ReserveError::Transition`] if
    /// already terminated or never committed and no longer held.
    pub fn terminate(&mut self, id: ReservationId, now: Instant) -> Result<(), ReserveError> {
        self.end_life(id, LifeInput::Terminate, now)
    }

    /// Fail: the driver cannot enforce the reservation; its capacity is
    /// freed and it can only be terminated.
    ///
    /// # Errors
    /// [`ReserveError::UnknownReservation`], [`ReserveError::Transition`]
    /// unless alive.
    pub fn fail(&mut self, id: ReservationId, now: Instant) -> Result<(), ReserveError> {
        self.end_life(id, LifeInput::Fail, now)
    }

    /// Puts back a reservation read from storage after a restart, as it
    /// was (a held one keeps its hold deadline, so it times out on time).
    ///
    /// # Errors
    /// [`ReserveError::UnknownResource`], [`ReserveError::BookFull`],
    /// [`ReserveError::ZeroRate`] or [`ReserveError::EndBeforeStart`] for a
    /// version the book would never have made, [`ReserveError::Overbooked`]
    /// (the store and the capacities disagree).
    pub fn restore(&mut self, r: Reservation) -> Result<(), ReserveError> {
        if self.live.len() >= self.config.max_reservations {
            return Err(ReserveError::BookFull(self.config.max_reservations));
        }
        for v in r.committed.iter().chain(r.pending.iter()) {
            if v.rate == Bandwidth::ZERO {
                return Err(ReserveError::ZeroRate);
            }
            if v.piece().is_none() {
                return Err(ReserveError::EndBeforeStart {
                    start: v.start,
                    end: v.end,
                });
            }
        }
        let resource = r.resource.clone();
        let table = self.table_mut(&resource)?;
        if r.life.is_created() {
            table
                .admit(r.id, r.footprint())
                .map_err(|source| ReserveError::Overbooked { resource, source })?;
        }
        self.next_id = self.next_id.max(r.id.0.saturating_add(1));
        let id = r.id;
        if r.life.is_created() {
            self.live.insert(id, r);
            self.note_timers(id);
        } else {
            self.finish(r);
        }
        self.refresh_shares();
        Ok(())
    }

    /// When the book next needs [`Book::handle_timeout`]: a hold running
    /// out, a committed version starting (background shares change) or
    /// ending. May be early after a request removed the earliest timer (an
    /// abort, a terminate); a wake with nothing due just makes it exact.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.next_due != Instant::MAX).then_some(self.next_due)
    }

    /// Acts on every timer due by `now`: holds time out, ended reservations
    /// pass their end time, background shares are recomputed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// The next announcement, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Policy, then capacity, for `r` (its pending version being the
    /// request); on success its footprint is on the table.
    fn admit(
        &mut self,
        r: &Reservation,
        interval: Interval,
        rate: Bandwidth,
    ) -> Result<(), ReserveError> {
        let query = PolicyQuery {
            rate,
            start: interval.start(),
            end: interval.end(),
            now: self.now,
        };
        let live = &self.live;
        let totals = |scope: &Scope| {
            let mut t = SlotTable::new(Bandwidth::MAX);
            let same = live
                .values()
                .filter(|o| o.id != r.id && o.resource == r.resource);
            for o in same {
                let mine = match scope {
                    Scope::User(u) => o.owner.user == *u && o.owner.domain == r.owner.domain,
                    Scope::Domain(d) => o.owner.domain == *d,
                };
                if mine {
                    // Admission on an unbounded table cannot fail.
                    let _ = t.admit(o.id, o.footprint());
                }
            }
            t.peak(interval)
        };
        if let Err(e) = self.config.policy.check(&r.owner, query, totals) {
            self.stats.refused_policy += 1;
            return Err(e.into());
        }
        let resource = r.resource.clone();
        let table = self.table_mut(&resource)?;
        if let Err(source) = table.admit(r.id, r.footprint()) {
            self.stats.refused_capacity += 1;
            return Err(ReserveError::Overbooked { resource, source });
        }
        self.stats.admitted += 1;
        Ok(())
    }

    fn check_times(
        &self,
        rate: Bandwidth,
        start: Instant,
        end: Instant,
    ) -> Result<Interval, ReserveError> {
        if rate == Bandwidth::ZERO {
            return Err(ReserveError::ZeroRate);
        }
        if end <= self.now {
            return Err(ReserveError::EndInPast { end, now: self.now });
        }
        Interval::new(start, end).ok_or(ReserveError::EndBeforeStart { start, end })
    }

    fn provisioning(
        &mut self,
        id: ReservationId,
        input: ProvisionInput,
        now: Instant,
    ) -> Result<(), ReserveError> {
        self.advance(now);
        let r = self.alive(id)?;
        if input == ProvisionInput::Provision && r.committed.is_none() {
            return Err(ReserveError::NotCommitted(id));
        }
        let next = r
            .provision
            .step(input)
            .map_err(|source| ReserveError::Transition { id, source })?;
        self.live_mut(id)?.provision = next;
        Ok(())
    }

    fn end_life(
        &mut self,
        id: ReservationId,
        input: LifeInput,
        now: Instant,
    ) -> Result<(), ReserveError> {
        self.advance(now);
        let transition = |source| ReserveError::Transition { id, source };
        if let Some(f) = self.finished.get_mut(&id) {
            // Finished already (past its end, failed, or a first version
            // aborted or timed out): only the record changes.
            f.life = f.life.step(input).map_err(transition)?;
            return Ok(());
        }
        let r = self
            .live
            .get(&id)
            .ok_or(ReserveError::UnknownReservation(id))?;
        let life = r.life.step(input).map_err(transition)?;
        let Some(mut r) = self.live.remove(&id) else {
            return Err(ReserveError::UnknownReservation(id));
        };
        if r.pending.take().is_some() {
            r.state = if r.committed.is_some() {
                ReservationState::Committed
            } else {
                ReservationState::Aborted
            };
        }
        r.hold_expires = None;
        r.provision = ProvisionState::Released;
        r.life = life;
        let (resource, class) = (r.resource.clone(), r.class);
        self.untable(&r);
        self.finish(r);
        self.refresh_shares_after(&resource, class);
        Ok(())
    }

    /// Ends a hold: the pending version is dropped; `next` is the
    /// reservation state after it.
    fn drop_hold(&mut self, id: ReservationId, next: ReservationState) {
        let Some(r) = self.live.get_mut(&id) else {
            return;
        };
        r.state = next;
        r.pending = None;
        r.hold_expires = None;
        if r.committed.is_some() {
            self.settle_footprint(id);
        } else if let Some(mut r) = self.live.remove(&id) {
            // A first version that never committed is over: its life ends
            // with it (NSI would wait for a terminate; nothing is left to
            // terminate).
            r.life = r.life.step(LifeInput::Terminate).unwrap_or(r.life);
            self.untable(&r);
            self.finish(r);
        }
    }

    /// Puts `id`'s current footprint on the table after it shrank (a hold
    /// committed or dropped): the new footprint is pointwise at most the
    /// one on the table, so it always fits.
    fn settle_footprint(&mut self, id: ReservationId) {
        let Some(r) = self.live.get(&id) else { return };
        let footprint = r.footprint();
        if let Some(res) = self.resources.get_mut(&r.resource) {
            // Cannot fail (it shrank); if it did, the larger old footprint
            // stays, which over-reserves rather than over-admits.
            let _ = res.table.admit(id, footprint);
        }
    }

    fn untable(&mut self, r: &Reservation) {
        if let Some(res) = self.resources.get_mut(&r.resource) {
            res.table.remove(r.id);
        }
    }

    fn finish(&mut self, r: Reservation) {
        if self.finished_order.len() >= MAX_FINISHED {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
        self.finished_order.push_back(r.id);
        self.finished.insert(r.id, r);
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    fn table(&self, resource: &str) -> Result<&SlotTable, ReserveError> {
        self.resources
            .get(resource)
            .map(|r| &r.table)
            .ok_or_else(|| ReserveError::UnknownResource(resource.to_string()))
    }

    fn table_mut(&mut self, resource: &str) -> Result<&mut SlotTable, ReserveError> {
        self.resources
            .get_mut(resource)
            .map(|r| &mut r.table)
            .ok_or_else(|| ReserveError::UnknownResource(resource.to_string()))
    }

    /// A live reservation; finished ones are [`ReserveError::NotAlive`].
    fn alive(&self, id: ReservationId) -> Result<&Reservation, ReserveError> {
        if let Some(r) = self.live.get(&id) {
            return Ok(r);
        }
        match self.finished.get(&id) {
            Some(r) => Err(ReserveError::NotAlive {
                id,
                state: r.state,
                life: r.life,
            }),
            None => Err(ReserveError::UnknownReservation(id)),
        }
    }

    fn live_mut(&mut self, id: ReservationId) -> Result<&mut Reservation, ReserveError> {
        self.live
            .get_mut(&id)
            .ok_or(ReserveError::UnknownReservation(id))
    }
}

fn step(
    id: ReservationId,
    from: ReservationState,
    input: ReservationInput,
    in_force: bool,
) -> Result<ReservationState, ReserveError> {
    from.step(input, in_force)
        .map_err(|source| ReserveError::Transition { id, source })
}

mod shares;
mod timers;

#[cfg(test)]
mod tests;
