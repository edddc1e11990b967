//! A connection's streams by id: a vector sorted by id.
//!
//! A connection has a few streams (a bulk transfer one or two, at most
//! `MAX_STREAMS`), and the send and receive paths look one up, or walk them
//! all, for every packet. A `BTreeMap` cost a tree descent per lookup and a
//! range search per walk (1.5–3 % of a `braid perf` client's CPU); a
//! sorted vector is a binary search (over a cache line or two for the
//! usual few streams) and a slice walk. Opening a stream inserts in the
//! middle at worst: O(n) for n ≤ `MAX_STREAMS`, once per stream.
//!
//! Main type: [`StreamTable`]. Invariant: ids strictly increase along the
//! vector, so iteration is in id order, as a `BTreeMap`'s was.

use crate::wire::StreamId;

/// Values by stream id, iterated in id order.
#[derive(Debug)]
pub struct StreamTable<V> {
    entries: Vec<(StreamId, V)>,
}

impl<V> Default for StreamTable<V> {
    fn default() -> Self {
        StreamTable {
            entries: Vec::new(),
        }
    }
}

impl<V> StreamTable<V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, id: StreamId) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&id, |(k, _)| *k)
    }

    /// The value of stream `id`.
    pub fn get(&self, id: &StreamId) -> Option<&V> {
        self.position(*id).ok().map(|i| &self.entries[i].1)
    }

    /// The value of stream `id`, mutably.
    pub fn get_mut(&mut self, id: &StreamId) -> Option<&mut V> {
        match self.position(*id) {
            Ok(i) => Some(&mut self.entries[i].1),
            Err(_) => None,
        }
    }

    /// The value of stream `id`, inserted first with `V::default()` if
    /// absent.
    pub fn get_or_default(&mut self, id: StreamId) -> &mut V
    where
        V: Default,
    {
        let i = match self.position(id) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (id, V::default()));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Ids and values in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&StreamId, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Values in id order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Ids in order.
    pub fn keys(&self) -> impl Iterator<Item = &StreamId> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The first id above `id`, if any.
    pub fn next_after(&self, id: StreamId) -> Option<StreamId> {
        let i = match self.position(id) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        self.entries.get(i).map(|(k, _)| *k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_id_order_and_finds_what_was_inserted() {
        let mut t: StreamTable<u32> = StreamTable::new();
        for id in [5u32, 1, 9, 3, 5, 1] {
            *t.get_or_default(StreamId(id)) += id;
        }
        let ids: Vec<u32> = t.keys().map(|k| k.0).collect();
        assert_eq!(ids, [1, 3, 5, 9]);
        assert_eq!(t.get(&StreamId(5)), Some(&10));
        assert_eq!(t.get(&StreamId(1)), Some(&2));
        assert_eq!(t.get(&StreamId(2)), None);
        assert!(t.get_mut(&StreamId(4)).is_none());
        *t.get_mut(&StreamId(9)).unwrap() = 0;
        let vals: Vec<u32> = t.values().copied().collect();
        assert_eq!(vals, [2, 3, 10, 0]);
        assert_eq!(t.iter().count(), 4);
        assert_eq!(t.next_after(StreamId(3)), Some(StreamId(5)));
        assert_eq!(t.next_after(StreamId(4)), Some(StreamId(5)));
        assert_eq!(t.next_after(StreamId(0)), Some(StreamId(1)));
        assert_eq!(t.next_after(StreamId(9)), None);
    }
}
