//! Co-reservation: one request over several resources, possibly in several
//! books (domains), held all, then committed all, or aborted all (seed 004
//! §3, "co-reservation of networks, CPUs, and storage systems"; NSI's
//! two-phase reserve/commit across aggregator and provider agents).
//!
//! A [`Coordinator`] is sans-IO: it emits [`Command`]s for the books
//! ([`Coordinator::poll_command`]) and takes their replies
//! ([`Coordinator::handle_reply`]); the driver carries them in-process
//! ([`Coordinator::run_local`]) or to peer brokers over the network.
//!
//! Phases: holding (every part reserved) → committing (every part
//! committed) → committed. A refused hold aborts every part held (aborting
//! → aborted). A refused commit (a hold that ran out because the
//! coordinator was slow) aborts what is still held and terminates what was
//! committed (→ failed), so no domain keeps a committed part the others
//! lack.
//!
//! Crash safety: commits are sent only once every part is held, so a
//! coordinator that dies between the phases leaves only holds, and every
//! book times them out ([`crate::reserve::BookConfig::hold_time`]): nothing
//! committed anywhere. A coordinator that dies in the middle of the commit
//! phase can leave some parts committed; recovering it (re-sending the
//! commits from a persisted part list, or terminating them) is its
//! driver's job — the broker's — and is not modelled here.

use std::collections::VecDeque;

use crate::id::ReservationId;
use crate::reserve::book::Book;
use crate::reserve::error::ReserveError;
use crate::reserve::record::ReserveRequest;
use crate::time::Instant;

/// Most parts in one co-reservation (network, CPU, storage along a path of
/// a few domains).
pub const MAX_PARTS: usize = 16;

/// A book, named by the driver (an index into its list of brokers).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct DomainId(pub u32);

/// One part of a co-reservation: a request to one book.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Part {
    /// The book that holds the resource.
    pub domain: DomainId,
    /// The request for it.
    pub request: ReserveRequest,
}

/// What the coordinator asks a book to do.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Reserve (hold) the part.
    Reserve(ReserveRequest),
    /// Commit the part's hold.
    Commit(ReservationId),
    /// Abort the part's hold.
    Abort(ReservationId),
    /// Terminate the part's committed reservation.
    Terminate(ReservationId),
}

/// A command for one part.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Command {
    /// The part's index.
    pub part: usize,
    /// The book to send it to.
    pub domain: DomainId,
    /// What to do.
    pub action: Action,
}

/// A book's answer to a [`Command`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The reserve succeeded: the part is held under this id.
    Held(ReservationId),
    /// The commit, abort or terminate succeeded.
    Done,
    /// The book refused.
    Refused(ReserveError),
}

/// Where the whole co-reservation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Reserving every part.
    Holding,
    /// Every part held; committing every part.
    Committing,
    /// Every part committed.
    Committed,
    /// A hold was refused; aborting the parts held.
    Aborting,
    /// Nothing is held or committed.
    Aborted,
    /// A commit was refused; aborting and terminating the others.
    Failing,
    /// The others are aborted or terminated; nothing is committed.
    Failed,
}

/// A part's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartState {
    /// A command is out and not answered.
    Waiting,
    /// Held under an id.
    Held,
    /// Committed.
    Committed,
    /// Nothing held (refused, aborted or terminated).
    Released,
}

/// A reply that does not fit what the coordinator asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoError {
    /// No parts, or more than [`MAX_PARTS`].
    #[error("a co-reservation has 1 to {MAX_PARTS} parts, not {0}")]
    Parts(usize),
    /// No part with that index.
    #[error("no part {0}")]
    UnknownPart(usize),
    /// The part has no command out.
    #[error("part {0} was not waiting for a reply")]
    NotWaiting(usize),
}

#[derive(Debug, Clone)]
struct Slot {
    domain: DomainId,
    request: ReserveRequest,
    id: Option<ReservationId>,
    state: PartState,
    /// The action out, while waiting.
    pending: Option<Action>,
}

/// The two-phase coordinator of one co-reservation (see the module doc).
///
/// Driving: [`Coordinator::poll_command`] until `None`, deliver each
/// command to its book, hand each answer to
/// [`Coordinator::handle_reply`]; done when [`Coordinator::phase`] is
/// committed, aborted or failed.
#[derive(Debug, Clone)]
pub struct Coordinator {
    parts: Vec<Slot>,
    phase: Phase,
    /// Bounded by two commands per part (a reserve, then a commit, abort or
    /// terminate), at most [`MAX_PARTS`] parts.
    commands: VecDeque<Command>,
}

impl Coordinator {
    /// A coordinator that will hold every part.
    ///
    /// # Errors
    /// [`CoError::Parts`] for no parts or more than [`MAX_PARTS`].
    pub fn new(parts: Vec<Part>) -> Result<Coordinator, CoError> {
        if parts.is_empty() || parts.len() > MAX_PARTS {
            return Err(CoError::Parts(parts.len()));
        }
        let mut c = Coordinator {
            parts: parts
                .into_iter()
                .map(|p| Slot {
                    domain: p.domain,
                    request: p.request,
                    id: None,
                    state: PartState::Waiting,
                    pending: None,
                })
                .collect(),
            phase: Phase::Holding,
            commands: VecDeque::with_capacity(2 * MAX_PARTS),
        };
        for i in 0..c.parts.len() {
            let action = Action::Reserve(c.parts[i].request.clone());
            c.send(i, action);
        }
        Ok(c)
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Each part's progress and reservation id (once held).
    pub fn parts(&self) -> impl Iterator<Item = (DomainId, PartState, Option<ReservationId>)> + '_ {
        self.parts.iter().map(|s| (s.domain, s.state, s.id))
    }

    /// Whether the coordinator has nothing more to do.
    pub fn is_done(&self) -> bool {
        matches!(
            self.phase,
            Phase::Committed | Phase::Aborted | Phase::Failed
        )
    }

    /// The next command to deliver.
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// A book's answer to the last command for `part`.
    ///
    /// # Errors
    /// [`CoError`] if `part` does not exist or had no command out; the
    /// coordinator is unchanged.
    pub fn handle_reply(&mut self, part: usize, reply: Reply) -> Result<(), CoError> {
        let slot = self.parts.get_mut(part).ok_or(CoError::UnknownPart(part))?;
        let action = slot.pending.take().ok_or(CoError::NotWaiting(part))?;
        let (state, ok) = match (&action, &reply) {
            (Action::Reserve(_), Reply::Held(id)) => {
                slot.id = Some(*id);
                (PartState::Held, true)
            }
            (Action::Commit(_), Reply::Done) => (PartState::Committed, true),
            // An abort or terminate refused: the book already dropped the
            // part (its hold ran out, it was terminated); nothing is held.
            (Action::Abort(_) | Action::Terminate(_), _) => (PartState::Released, true),
            // A reserve or commit refused (or answered with the wrong
            // kind of reply): nothing is held for the part.
            (Action::Reserve(_) | Action::Commit(_), _) => (PartState::Released, false),
        };
        slot.state = state;
        match (self.phase, ok) {
            (Phase::Holding, false) => {
                self.phase = Phase::Aborting;
                self.unwind();
            }
            (Phase::Committing, false) => {
                self.phase = Phase::Failing;
                self.unwind();
            }
            (Phase::Aborting | Phase::Failing, _) => self.unwind(),
            _ => {}
        }
        self.advance();
        Ok(())
    }

    /// Runs the coordinator to the end against books in this process:
    /// `books[d]` is [`DomainId`] `d`. A command for a missing book is
    /// answered as refused (an unknown resource).
    pub fn run_local(&mut self, books: &mut [Book], now: Instant) -> Phase {
        while let Some(cmd) = self.poll_command() {
            let reply = match books.get_mut(cmd.domain.0 as usize) {
                None => Reply::Refused(ReserveError::UnknownResource(format!(
                    "domain {}",
                    cmd.domain.0
                ))),
                Some(book) => {
                    let done = |r: Result<(), ReserveError>| {
                        r.map_or_else(Reply::Refused, |()| Reply::Done)
                    };
                    match cmd.action {
                        Action::Reserve(req) => book
                            .reserve(req, now)
                            .map_or_else(Reply::Refused, Reply::Held),
                        Action::Commit(id) => done(book.commit(id, now)),
                        Action::Abort(id) => done(book.abort(id, now)),
                        Action::Terminate(id) => done(book.terminate(id, now)),
                    }
                }
            };
            // The command came from this coordinator, so the part is waiting.
            let _ = self.handle_reply(cmd.part, reply);
        }
        self.phase
    }

    /// Queues `action` for `part`, an index below `self.parts.len()`
    /// (callers iterate over the parts).
    fn send(&mut self, part: usize, action: Action) {
        let slot = &mut self.parts[part];
        slot.state = PartState::Waiting;
        slot.pending = Some(action.clone());
        self.commands.push_back(Command {
            part,
            domain: slot.domain,
            action,
        });
    }

    /// While aborting or failing: abort every part held, terminate every
    /// part committed.
    fn unwind(&mut self) {
        for i in 0..self.parts.len() {
            let s = &self.parts[i];
            let Some(id) = s.id else { continue };
            match s.state {
                PartState::Held => self.send(i, Action::Abort(id)),
                PartState::Committed => self.send(i, Action::Terminate(id)),
                PartState::Waiting | PartState::Released => {}
            }
        }
    }

    fn advance(&mut self) {
        let all = |st: PartState| self.parts.iter().all(|s| s.state == st);
        let none_waiting = self.parts.iter().all(|s| s.state != PartState::Waiting);
        match self.phase {
            Phase::Holding if all(PartState::Held) => {
                self.phase = Phase::Committing;
                for i in 0..self.parts.len() {
                    if let Some(id) = self.parts[i].id {
                        self.send(i, Action::Commit(id));
                    }
                }
            }
            Phase::Committing if all(PartState::Committed) => self.phase = Phase::Committed,
            Phase::Aborting if none_waiting => self.phase = Phase::Aborted,
            Phase::Failing if none_waiting => self.phase = Phase::Failed,
            _ => {}
        }
    }
}
