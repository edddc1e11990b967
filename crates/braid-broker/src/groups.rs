//! Co-reservation groups: one `POST /v1/reservations` over several
//! resources is one group, whose parts are held together, committed
//! together, aborted together and terminated together (seed 004 §3,
//! co-reservation; NSI's two-phase reserve/commit).
//!
//! The owner task holds a [`Groups`] index (part → group, group → parts)
//! and applies a group's commit, abort or terminate to every part in one
//! step, so the parts' rows are written in one store transaction: a crash
//! leaves all of them committed or none. A group's id is the id of its
//! first part (reservation ids are never reused, so group ids are not
//! either). Groups are stored in `reservation_groups` (migration 0003).
//!
//! braid-core's [`braid_core::reserve::Coordinator`] runs hold → commit in
//! one go; the broker's API is client-driven two-phase (hold now, commit
//! when the client says so), so within one book the owner applies the
//! phases itself with the same rule: all or none.

use std::collections::BTreeMap;

use braid_core::reserve::{Book, ReservationState, ReserveError};
use braid_core::{Instant, ReservationId};

use crate::store::{Store, StoreError};

/// The parts of each live group and the group of each part.
#[derive(Debug, Default, Clone)]
pub struct Groups {
    parts: BTreeMap<ReservationId, Vec<ReservationId>>,
    group_of: BTreeMap<ReservationId, ReservationId>,
}

/// Why a group's commit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// A part cannot be committed, so none is.
    #[error("group {group}: part {part} on resource {resource:?} is {state}, not held; nothing committed")]
    NotHeld {
        /// The group.
        group: u64,
        /// The part at fault.
        part: u64,
        /// Its resource.
        resource: String,
        /// Its state.
        state: String,
    },
    /// No such group (for this viewer).
    #[error("no group {0}")]
    NotFound(u64),
}

impl Groups {
    /// Records a new group of `parts` (two or more); its id is the first
    /// part's.
    pub fn insert(&mut self, parts: Vec<ReservationId>) -> Option<ReservationId> {
        let group = *parts.first()?;
        for p in &parts {
            self.group_of.insert(*p, group);
        }
        self.parts.insert(group, parts);
        Some(group)
    }

    /// The group `id` is a part of.
    pub fn group_of(&self, id: ReservationId) -> Option<ReservationId> {
        self.group_of.get(&id).copied()
    }

    /// The parts of `group`.
    pub fn parts(&self, group: ReservationId) -> Option<&[ReservationId]> {
        self.parts.get(&group).map(Vec::as_slice)
    }

    /// Forgets the groups none of whose parts `book` still knows (live
    /// or recently finished), so the index stays as small as the book.
    pub fn prune(&mut self, book: &Book) {
        let known = |p: &ReservationId| book.reservation(*p).is_some();
        let gone: Vec<ReservationId> = self
            .parts
            .iter()
            .filter(|(_, ps)| !ps.iter().any(known))
            .map(|(g, _)| *g)
            .collect();
        for g in gone {
            if let Some(ps) = self.parts.remove(&g) {
                for p in ps {
                    self.group_of.remove(&p);
                }
            }
        }
    }
}

/// The groups with a live part, from the store.
///
/// # Errors
/// [`StoreError`].
pub async fn load(store: &Store) -> Result<Groups, StoreError> {
    let mut by_group: BTreeMap<ReservationId, Vec<ReservationId>> = BTreeMap::new();
    for (part, group) in store.groups().await? {
        by_group.entry(group).or_default().push(part);
    }
    let mut groups = Groups::default();
    for (group, mut parts) in by_group {
        // The group id is its first part's; keep that order.
        parts.sort_unstable_by_key(|p| (*p != group, p.0));
        groups.insert(parts);
    }
    Ok(groups)
}

/// Commits every held part of `parts`, all or none: refused (nothing
/// changed) unless each part is held, or committed with nothing held (a
/// modification of another part is being committed).
///
/// # Errors
/// [`GroupError::NotHeld`] naming the first part that is neither;
/// a book error of a part (only if the book and this check disagree).
pub fn commit(
    book: &mut Book,
    group: ReservationId,
    parts: &[ReservationId],
    now: Instant,
) -> Result<Vec<ReservationId>, CommitError> {
    book.handle_timeout(now);
    let mut held = Vec::new();
    for &p in parts {
        let r = book.reservation(p);
        match r.map(|r| (r.state, r.pending.is_some())) {
            Some((ReservationState::Held, _)) => held.push(p),
            Some((ReservationState::Committed, false)) => {}
            _ => {
                let (resource, state) = match r {
                    Some(r) => (r.resource.clone(), state_name(r.state)),
                    None => (String::new(), "over".to_string()),
                };
                return Err(CommitError::Group(GroupError::NotHeld {
                    group: group.0,
                    part: p.0,
                    resource,
                    state,
                }));
            }
        }
    }
    if held.is_empty() {
        // Nothing held anywhere: let the book say why for the first part.
        let first = parts.first().copied().unwrap_or(group);
        book.commit(first, now)?;
        return Ok(vec![first]);
    }
    for (i, &p) in held.iter().enumerate() {
        if let Err(e) = book.commit(p, now) {
            // Checked held above at this `now`, so the book should not
            // refuse; if it does, undo: nothing committed the others lack.
            for &q in &held[..i] {
                let _ = book.terminate(q, now);
            }
            for &q in &held[i..] {
                let _ = book.abort(q, now);
            }
            return Err(e.into());
        }
    }
    Ok(held)
}

/// Aborts every held part of `parts` (the others are left as they are);
/// the book's refusal for `asked` if none was held.
///
/// # Errors
/// The book's error for `asked` when no part was held.
pub fn abort(
    book: &mut Book,
    asked: ReservationId,
    parts: &[ReservationId],
    now: Instant,
) -> Result<Vec<ReservationId>, ReserveError> {
    let done: Vec<ReservationId> = parts
        .iter()
        .copied()
        .filter(|&p| book.abort(p, now).is_ok())
        .collect();
    if done.is_empty() {
        book.abort(asked, now)?;
    }
    Ok(done)
}

/// Terminates every live part of `parts`; the book's refusal for `asked`
/// if it could not be terminated.
///
/// # Errors
/// The book's error for `asked`.
pub fn terminate(
    book: &mut Book,
    asked: ReservationId,
    parts: &[ReservationId],
    now: Instant,
) -> Result<Vec<ReservationId>, ReserveError> {
    let mut done = Vec::new();
    let mut asked_err = None;
    for &p in parts {
        match book.terminate(p, now) {
            Ok(()) => done.push(p),
            Err(e) if p == asked => asked_err = Some(e),
            Err(_) => {}
        }
    }
    match asked_err {
        Some(e) if done.is_empty() => Err(e),
        _ => Ok(done),
    }
}

/// A refused group commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// A part is not held.
    #[error(transparent)]
    Group(#[from] GroupError),
    /// The book refused.
    #[error(transparent)]
    Book(#[from] ReserveError),
}

fn state_name(s: ReservationState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::reserve::{BookConfig, Class, Owner, ReserveRequest};
    use braid_core::{Bandwidth, Duration};

    fn book() -> Book {
        let mut b = Book::new(BookConfig::default());
        b.add_resource("link", Bandwidth::from_mbps(100)).unwrap();
        b.add_resource("cpu", Bandwidth::from_mbps(100)).unwrap();
        b
    }

    fn hold(b: &mut Book, resource: &str) -> ReservationId {
        b.reserve(
            ReserveRequest {
                owner: Owner::new("alice", "lab"),
                resource: resource.into(),
                rate: Bandwidth::from_mbps(10),
                start: Instant::ZERO,
                end: Instant::ZERO + Duration::from_secs(600),
                class: Class::Foreground,
            },
            Instant::ZERO,
        )
        .unwrap()
    }

    #[test]
    fn commit_is_all_or_none() {
        let mut b = book();
        let (a, c) = (hold(&mut b, "link"), hold(&mut b, "cpu"));
        let mut g = Groups::default();
        let gid = g.insert(vec![a, c]).unwrap();
        assert_eq!(g.group_of(c), Some(a));
        // One part aborted on its own: the group commit refuses, naming it,
        // and the other part stays held.
        b.abort(c, Instant::ZERO).unwrap();
        let e = commit(&mut b, gid, g.parts(gid).unwrap(), Instant::ZERO).unwrap_err();
        assert!(e.to_string().contains("\"cpu\""), "{e}");
        assert_eq!(b.reservation(a).unwrap().state, ReservationState::Held);

        let (a, c) = (hold(&mut b, "link"), hold(&mut b, "cpu"));
        let gid = g.insert(vec![a, c]).unwrap();
        assert_eq!(
            commit(&mut b, gid, &[a, c], Instant::ZERO).unwrap(),
            vec![a, c]
        );
        for p in [a, c] {
            assert_eq!(b.reservation(p).unwrap().state, ReservationState::Committed);
        }
        assert_eq!(
            terminate(&mut b, c, &[a, c], Instant::ZERO).unwrap().len(),
            2
        );
        g.prune(&b);
        assert_eq!(g.group_of(a), Some(a), "finished parts are still shown");
        g.prune(&book());
        assert_eq!(g.group_of(a), None);
    }
}
