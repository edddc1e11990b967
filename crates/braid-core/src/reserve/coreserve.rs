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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::policy::Owner;
    use crate::reserve::state::ReservationState;
    use crate::reserve::{Book, BookConfig};
    use crate::time::Duration;
    use crate::units::Bandwidth;

    fn secs(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }
    fn part(domain: u32, resource: &str, mbit: u64) -> Part {
        Part {
            domain: DomainId(domain),
            request: ReserveRequest {
                owner: Owner::new("alice", "lab"),
                resource: resource.into(),
                rate: Bandwidth::from_mbps(mbit),
                start: secs(0),
                end: secs(600),
                class: Default::default(),
            },
        }
    }
    /// Two domains: 0 has a link and a CPU, 1 has the transit link.
    fn books() -> Vec<Book> {
        let mut a = Book::new(BookConfig::default());
        a.add_resource("link", Bandwidth::from_mbps(100)).unwrap();
        a.add_resource("cpu", Bandwidth::from_mbps(100)).unwrap();
        let mut b = Book::new(BookConfig::default());
        b.add_resource("transit", Bandwidth::from_mbps(50)).unwrap();
        vec![a, b]
    }
    fn committed(books: &[Book]) -> usize {
        books
            .iter()
            .flat_map(|b| b.reservations())
            .filter(|r| r.committed.is_some())
            .count()
    }
    fn used(books: &[Book]) -> Bandwidth {
        let at = secs(1);
        let a = books[0].usage_at("link", at).unwrap();
        let c = books[0].usage_at("cpu", at).unwrap();
        let t = books[1].usage_at("transit", at).unwrap();
        a.saturating_add(c).saturating_add(t)
    }

    #[test]
    fn all_held_then_all_committed() {
        let mut books = books();
        let parts = vec![
            part(0, "link", 40),
            part(0, "cpu", 20),
            part(1, "transit", 40),
        ];
        let mut c = Coordinator::new(parts).unwrap();
        assert_eq!(c.run_local(&mut books, secs(0)), Phase::Committed);
        assert!(c.is_done());
        assert_eq!(committed(&books), 3);
        assert!(c
            .parts()
            .all(|(_, s, id)| s == PartState::Committed && id.is_some()));
    }

    #[test]
    fn one_refusal_aborts_every_part() {
        let mut books = books();
        // The transit domain has only 50 Mbit/s.
        let parts = vec![
            part(0, "link", 60),
            part(0, "cpu", 20),
            part(1, "transit", 60),
        ];
        let mut c = Coordinator::new(parts).unwrap();
        assert_eq!(c.run_local(&mut books, secs(0)), Phase::Aborted);
        assert_eq!(committed(&books), 0);
        assert_eq!(used(&books), Bandwidth::ZERO);
        assert!(c.parts().all(|(_, s, _)| s == PartState::Released));
    }

    #[test]
    fn a_crash_between_the_phases_leaves_nothing_committed() {
        let mut books = books();
        let parts = vec![part(0, "link", 40), part(1, "transit", 40)];
        let mut c = Coordinator::new(parts).unwrap();
        // Deliver the holds, then the coordinator dies with its commits unsent.
        let mut commits = 0;
        while let Some(cmd) = c.poll_command() {
            let book = &mut books[cmd.domain.0 as usize];
            let reply = match cmd.action {
                Action::Reserve(req) => Reply::Held(book.reserve(req, secs(0)).unwrap()),
                Action::Commit(_) => {
                    commits += 1;
                    continue;
                }
                other => panic!("unexpected {other:?}"),
            };
            c.handle_reply(cmd.part, reply).unwrap();
        }
        assert_eq!((c.phase(), commits), (Phase::Committing, 2));
        drop(c);
        assert_eq!(used(&books), Bandwidth::from_mbps(80));
        // Every book times its hold out on its own.
        for b in &mut books {
            let wake = b.poll_timeout().unwrap();
            assert_eq!(wake, secs(0) + Duration::from_secs(120));
            b.handle_timeout(wake);
        }
        assert_eq!(committed(&books), 0);
        assert_eq!(used(&books), Bandwidth::ZERO);
        for b in &books {
            assert!(b.reservations().next().is_none());
        }
    }

    #[test]
    fn a_refused_commit_unwinds_the_committed_parts() {
        let mut books = books();
        let parts = vec![part(0, "link", 40), part(1, "transit", 40)];
        let mut c = Coordinator::new(parts).unwrap();
        let mut held = Vec::new();
        for _ in 0..2 {
            let cmd = c.poll_command().expect("one hold per part");
            let Action::Reserve(req) = cmd.action else {
                panic!("holds first")
            };
            let id = books[cmd.domain.0 as usize].reserve(req, secs(0)).unwrap();
            held.push((cmd.part, cmd.domain, id));
            c.handle_reply(cmd.part, Reply::Held(id)).unwrap();
        }
        // The coordinator was slow: domain 1's hold has run out.
        books[1].handle_timeout(secs(120));
        // Domain 0 commits at 119 s (its own clock), domain 1 refuses.
        let mut rounds = 0;
        while let Some(cmd) = c.poll_command() {
            rounds += 1;
            let now = if cmd.domain.0 == 0 {
                secs(119)
            } else {
                secs(120)
            };
            let book = &mut books[cmd.domain.0 as usize];
            let r = match cmd.action {
                Action::Commit(id) => book.commit(id, now),
                Action::Abort(id) => book.abort(id, now),
                Action::Terminate(id) => book.terminate(id, now),
                Action::Reserve(_) => panic!("no second hold"),
            };
            c.handle_reply(cmd.part, r.map_or_else(Reply::Refused, |()| Reply::Done))
                .unwrap();
        }
        assert_eq!(c.phase(), Phase::Failed);
        assert_eq!(rounds, 3, "two commits and one terminate");
        assert_eq!(committed(&books), 0);
        let (_, _, id0) = held[0];
        assert_eq!(
            books[0].reservation(id0).unwrap().state,
            ReservationState::Committed
        );
        assert!(!books[0].reservation(id0).unwrap().life.is_created());
    }

    #[test]
    fn replies_are_checked() {
        assert_eq!(Coordinator::new(Vec::new()).unwrap_err(), CoError::Parts(0));
        let many = (0..=MAX_PARTS).map(|_| part(0, "link", 1)).collect();
        assert_eq!(
            Coordinator::new(many).unwrap_err(),
            CoError::Parts(MAX_PARTS + 1)
        );
        let mut c = Coordinator::new(vec![part(0, "link", 1)]).unwrap();
        assert_eq!(c.handle_reply(3, Reply::Done), Err(CoError::UnknownPart(3)));
        let _ = c.poll_command();
        c.handle_reply(0, Reply::Held(ReservationId(1))).unwrap();
        let _ = c.poll_command();
        c.handle_reply(0, Reply::Done).unwrap();
        assert_eq!(c.phase(), Phase::Committed);
        assert_eq!(c.handle_reply(0, Reply::Done), Err(CoError::NotWaiting(0)));
        // An unknown domain in run_local is a refusal, and everything unwinds.
        let mut books = books();
        let mut c = Coordinator::new(vec![part(0, "link", 1), part(7, "x", 1)]).unwrap();
        assert_eq!(c.run_local(&mut books, secs(0)), Phase::Aborted);
        assert_eq!(used(&books), Bandwidth::ZERO);
    }
}
