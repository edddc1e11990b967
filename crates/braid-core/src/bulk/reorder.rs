//! The receiver's bounded reorder window.
//!
//! [`Reorder`] holds verified blocks that arrived ahead of the next one to
//! write. Blocks are handed to the writer strictly in order
//! ([`Reorder::pop_ready`]); the writer reports what it wrote
//! ([`Reorder::mark_written`]).
//!
//! Invariant: every block held or being written has
//! `written <= seq < written + window`, and their bytes add up to at most
//! `window_bytes`, so memory is bounded by `window_bytes`. A block outside
//! either bound is a protocol violation (the sender was told both).

use std::collections::BTreeMap;

/// A block's contents as the window sees them: only its length matters.
///
/// The runtime stores the bytes (`Vec<u8>`); a simulator that moves no
/// bytes stores a [`BlockLen`].
pub trait Payload {
    /// Length in bytes.
    fn len_bytes(&self) -> u64;
}

impl Payload for Vec<u8> {
    fn len_bytes(&self) -> u64 {
        self.len() as u64
    }
}

/// A block that carries only its length (for simulations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLen(pub u32);

impl Payload for BlockLen {
    fn len_bytes(&self) -> u64 {
        u64::from(self.0)
    }
}

/// What to do with an arriving block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Already have it (or wrote it): read and drop the payload.
    Duplicate,
    /// Within the window and new: read it.
    Take,
    /// Beyond the window: the sender broke the protocol.
    Violation,
}

/// The reorder window; see the module docs.
///
/// Drive it with [`Reorder::verdict`] before reading a block's payload,
/// [`Reorder::insert`] once it is verified, [`Reorder::pop_ready`] to take
/// what is next in order and [`Reorder::mark_written`] once written.
#[derive(Debug)]
pub struct Reorder<T = Vec<u8>> {
    window: u64,
    window_bytes: u64,
    out_bytes: u64,
    written: u64,
    popped: u64,
    held: BTreeMap<u64, T>,
    held_bytes: u64,
    peak_blocks: u64,
    peak_bytes: u64,
    duplicates: u64,
}

impl<T: Payload> Reorder<T> {
    /// An empty window of `window` blocks and `window_bytes` bytes.
    pub fn new(window: u64, window_bytes: u64) -> Self {
        Reorder {
            window,
            window_bytes,
            out_bytes: 0,
            written: 0,
            popped: 0,
            held: BTreeMap::new(),
            held_bytes: 0,
            peak_blocks: 0,
            peak_bytes: 0,
            duplicates: 0,
        }
    }

    /// Classifies block `seq` of `len` bytes before its payload is read.
    pub fn verdict(&self, seq: u64, len: u64) -> Verdict {
        if seq < self.popped || self.held.contains_key(&seq) {
            Verdict::Duplicate
        } else if seq >= self.written.saturating_add(self.window)
            || self.held_bytes + self.out_bytes + len > self.window_bytes
        {
            Verdict::Violation
        } else {
            Verdict::Take
        }
    }

    /// Stores a verified block; returns false (and drops it) if it is a
    /// duplicate or outside the window.
    pub fn insert(&mut self, seq: u64, data: T) -> bool {
        if self.verdict(seq, data.len_bytes()) != Verdict::Take {
            self.duplicates += 1;
            return false;
        }
        self.held_bytes += data.len_bytes();
        self.held.insert(seq, data);
        let in_use = self.held.len() as u64 + (self.popped - self.written);
        self.peak_blocks = self.peak_blocks.max(in_use);
        self.peak_bytes = self.peak_bytes.max(self.held_bytes);
        true
    }

    /// Counts a duplicate that was dropped before being read.
    pub fn count_duplicate(&mut self) {
        self.duplicates += 1;
    }

    /// Takes the blocks that are next in order (possibly none).
    pub fn pop_ready(&mut self) -> Vec<(u64, T)> {
        let mut out = Vec::new();
        while let Some(data) = self.held.remove(&self.popped) {
            self.held_bytes -= data.len_bytes();
            self.out_bytes += data.len_bytes();
            out.push((self.popped, data));
            self.popped += 1;
        }
        out
    }

    /// The writer wrote `n` more blocks of `bytes` bytes in all.
    pub fn mark_written(&mut self, n: u64, bytes: u64) {
        self.written = (self.written + n).min(self.popped);
        self.out_bytes = self.out_bytes.saturating_sub(bytes);
    }

    /// Blocks written in order.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Window in blocks.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Window in bytes.
    pub fn window_bytes(&self) -> u64 {
        self.window_bytes
    }

    /// (peak blocks, peak bytes, duplicates).
    pub fn peaks(&self) -> (u64, u64, u64) {
        (self.peak_blocks, self.peak_bytes, self.duplicates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_within_window() {
        let mut r: Reorder = Reorder::new(3, 100);
        assert_eq!(r.verdict(3, 1), Verdict::Violation);
        assert_eq!(r.verdict(0, 101), Verdict::Violation);
        assert!(r.insert(2, vec![2]));
        assert!(r.insert(1, vec![1]));
        assert!(r.pop_ready().is_empty());
        assert!(r.insert(0, vec![0]));
        let got: Vec<u64> = r.pop_ready().into_iter().map(|(s, _)| s).collect();
        assert_eq!(got, vec![0, 1, 2]);
        // Not yet written: the window has not moved.
        assert_eq!(r.verdict(3, 1), Verdict::Violation);
        assert_eq!(r.verdict(2, 98), Verdict::Duplicate);
        r.mark_written(3, 3);
        assert_eq!(r.verdict(3, 100), Verdict::Take);
        assert_eq!(r.verdict(1, 1), Verdict::Duplicate);
        assert!(!r.insert(1, vec![1]));
        assert_eq!(r.peaks(), (3, 3, 1));
    }
}
