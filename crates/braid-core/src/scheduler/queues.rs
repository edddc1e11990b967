//! Per-stream message queues shared by every scheduler: bounded FIFOs of
//! message sizes, addressed by a dense slot index with a generation so that
//! heap entries that outlive a closed stream are recognised as stale; and
//! each stream's path restriction ([`Scheduler::handle_stream_paths`]).
//!
//! [`Scheduler::handle_stream_paths`]: super::Scheduler::handle_stream_paths

use super::spec::StreamSpec;
use super::{PathId, SchedError, StreamId, MAX_STREAMS};
use std::collections::{BTreeMap, VecDeque};

/// Default bound on queued messages per stream.
pub const DEFAULT_MAX_BACKLOG: usize = 1 << 16;

/// Most paths one stream's restriction may name
/// ([`Scheduler::handle_stream_paths`](super::Scheduler::handle_stream_paths)).
pub const MAX_STREAM_PATHS: usize = 256;

/// One open stream.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub id: StreamId,
    pub spec: StreamSpec,
    /// Sizes of queued messages, head first.
    pub queue: VecDeque<u32>,
    pub queued_bytes: u64,
    /// The paths the stream may use, sorted and without duplicates; `None`
    /// is any path, an empty list none.
    pub paths: Option<Vec<PathId>>,
}

impl Slot {
    /// Whether the stream may go on `path`.
    #[inline]
    pub fn allows(&self, path: PathId) -> bool {
        match &self.paths {
            None => true,
            Some(v) => v.binary_search(&path).is_ok(),
        }
    }

    /// Whether the stream may go on no path at all (an empty restriction).
    #[inline]
    pub fn unmappable(&self) -> bool {
        self.paths.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Open streams and their queues.
#[derive(Debug, Clone)]
pub(crate) struct StreamQueues {
    index: BTreeMap<StreamId, usize>,
    slots: Vec<Option<Slot>>,
    /// Generation per slot, bumped when the slot is reused.
    gens: Vec<u32>,
    max_backlog: usize,
}

impl StreamQueues {
    pub fn new(max_backlog: usize) -> Self {
        StreamQueues {
            index: BTreeMap::new(),
            slots: Vec::new(),
            gens: Vec::new(),
            max_backlog: max_backlog.max(1),
        }
    }

    /// Open a stream; returns its slot.
    pub fn open(&mut self, id: StreamId, spec: StreamSpec) -> Result<usize, SchedError> {
        spec.validate()?;
        if !id.in_range() {
            return Err(SchedError::StreamOutOfRange(id));
        }
        if self.index.contains_key(&id) {
            return Err(SchedError::DuplicateStream(id));
        }
        let slot = Slot {
            id,
            spec,
            queue: VecDeque::new(),
            queued_bytes: 0,
            paths: None,
        };
        let idx = if let Some(free) = self.slots.iter().position(Option::is_none) {
            self.gens[free] = self.gens[free].wrapping_add(1);
            self.slots[free] = Some(slot);
            free
        } else {
            if self.slots.len() >= MAX_STREAMS as usize {
                return Err(SchedError::TooManyStreams(MAX_STREAMS as usize));
            }
            self.slots.push(Some(slot));
            self.gens.push(0);
            self.slots.len() - 1
        };
        self.index.insert(id, idx);
        Ok(idx)
    }

    /// Close a stream; returns its former slot.
    pub fn close(&mut self, id: StreamId) -> Result<usize, SchedError> {
        let idx = self
            .index
            .remove(&id)
            .ok_or(SchedError::UnknownStream(id))?;
        self.slots[idx] = None;
        Ok(idx)
    }

    /// Gives stream `id` a new spec, keeping its queue and path
    /// restriction (moved, not copied); returns its slot, which has a new
    /// generation (entries that name the old one are stale).
    pub fn respec(&mut self, id: StreamId, spec: StreamSpec) -> Result<usize, SchedError> {
        spec.validate()?;
        let idx = self.slot_of(id)?;
        let old = self.slots[idx]
            .take()
            .ok_or(SchedError::UnknownStream(id))?;
        self.index.remove(&id);
        // Cannot fail: the spec is valid, the id was open and its slot is free.
        let new = self.open(id, spec)?;
        if let Some(slot) = self.slots[new].as_mut() {
            slot.queue = old.queue;
            slot.queued_bytes = old.queued_bytes;
            slot.paths = old.paths;
        }
        Ok(new)
    }

    /// Restrict stream `id` to `paths` (`None`: any path). Returns its slot
    /// and whether the restriction changed.
    pub fn set_paths(
        &mut self,
        id: StreamId,
        paths: Option<Vec<PathId>>,
    ) -> Result<(usize, bool), SchedError> {
        let idx = self.slot_of(id)?;
        let paths = match paths {
            Some(mut v) => {
                v.sort_unstable();
                v.dedup();
                if v.len() > MAX_STREAM_PATHS {
                    return Err(SchedError::TooManyPaths(MAX_STREAM_PATHS));
                }
                Some(v)
            }
            None => None,
        };
        let slot = self.slots[idx]
            .as_mut()
            .ok_or(SchedError::UnknownStream(id))?;
        let changed = slot.paths != paths;
        slot.paths = paths;
        Ok((idx, changed))
    }

    /// Whether the stream in slot `idx` may go on `path` (false if closed).
    #[inline]
    pub fn allows(&self, idx: usize, path: PathId) -> bool {
        self.get(idx).is_some_and(|s| s.allows(path))
    }

    pub fn slot_of(&self, id: StreamId) -> Result<usize, SchedError> {
        self.index
            .get(&id)
            .copied()
            .ok_or(SchedError::UnknownStream(id))
    }

    /// Queue a message; returns (slot, whether the queue was empty before).
    pub fn push(&mut self, id: StreamId, bytes: u32) -> Result<(usize, bool), SchedError> {
        let idx = self.slot_of(id)?;
        let bound = self.max_backlog;
        let slot = self.slots[idx]
            .as_mut()
            .ok_or(SchedError::UnknownStream(id))?;
        if slot.queue.len() >= bound {
            return Err(SchedError::BacklogFull { stream: id, bound });
        }
        let was_empty = slot.queue.is_empty();
        slot.queue.push_back(bytes);
        slot.queued_bytes += u64::from(bytes);
        Ok((idx, was_empty))
    }

    /// Pop the head of slot `idx`.
    pub fn pop(&mut self, idx: usize) -> Option<(StreamId, u32)> {
        let slot = self.slots.get_mut(idx)?.as_mut()?;
        let b = slot.queue.pop_front()?;
        slot.queued_bytes -= u64::from(b);
        Some((slot.id, b))
    }

    /// Put a message back at the head (a transmit the driver could not send).
    pub fn push_front(&mut self, idx: usize, bytes: u32) {
        if let Some(Some(slot)) = self.slots.get_mut(idx) {
            slot.queue.push_front(bytes);
            slot.queued_bytes += u64::from(bytes);
        }
    }

    pub fn head(&self, idx: usize) -> Option<u32> {
        self.slots.get(idx)?.as_ref()?.queue.front().copied()
    }

    pub fn get(&self, idx: usize) -> Option<&Slot> {
        self.slots.get(idx)?.as_ref()
    }

    pub fn gen(&self, idx: usize) -> u32 {
        self.gens.get(idx).copied().unwrap_or(0)
    }

    pub fn is_live(&self, idx: usize, gen: u32) -> bool {
        self.gen(idx) == gen && self.get(idx).is_some()
    }

    pub fn backlog(&self, id: StreamId) -> usize {
        self.slot_of(id)
            .ok()
            .and_then(|i| self.get(i))
            .map_or(0, |s| s.queue.len())
    }

    /// Open slots in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}
