//! An order-statistic treap: the data structure under [`SlidingWindow`].
//!
//! Keys are `(value, seq)` pairs ordered lexicographically, so equal values
//! are distinct entries and the tree is a multiset of values. Every node
//! carries the size and the sum of its subtree, which makes selection by
//! rank, "how many values ≤ b" and "sum of values ≤ b" one descent each.
//!
//! Invariants:
//! - binary-search order on `(value, seq)`; heap order on `prio`
//!   (a parent's priority is ≥ its children's);
//! - `count` and `sum` of a node are those of its subtree;
//! - nodes live in an arena (`Vec`) with a free list, so inserting after an
//!   eviction reuses the slot and the arena never grows beyond the largest
//!   size the tree has had.
//!
//! Priorities are `splitmix64(seq)`: deterministic (no RNG is constructed, so
//! results are byte-stable) and well mixed, which gives the usual treap
//! bound of expected O(log n) depth for any insertion order that does not
//! depend on the hash. Recursion in `split`/`merge` is as deep as the tree.
//!
//! [`SlidingWindow`]: super::SlidingWindow

/// Index of "no node".
const NIL: usize = usize::MAX;

#[derive(Debug, Clone)]
struct Node {
    value: u64,
    seq: u64,
    prio: u64,
    left: usize,
    right: usize,
    count: usize,
    sum: u128,
}

/// A multiset of `u64` values with order statistics and partial sums.
#[derive(Debug, Clone)]
pub(crate) struct OrderTree {
    nodes: Vec<Node>,
    free: Vec<usize>,
    root: usize,
}

/// A well-mixed 64-bit hash (the splitmix64 finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl OrderTree {
    /// An empty tree with room for `reserve` nodes before reallocating.
    pub(crate) fn with_capacity(reserve: usize) -> Self {
        OrderTree {
            nodes: Vec::with_capacity(reserve),
            free: Vec::new(),
            root: NIL,
        }
    }

    /// Number of values held.
    pub(crate) fn len(&self) -> usize {
        self.count(self.root)
    }

    /// Sum of all values held.
    pub(crate) fn total(&self) -> u128 {
        self.sum(self.root)
    }

    /// Removes everything (keeps the allocation).
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
        self.root = NIL;
    }

    fn count(&self, i: usize) -> usize {
        self.nodes.get(i).map_or(0, |n| n.count)
    }

    fn sum(&self, i: usize) -> u128 {
        self.nodes.get(i).map_or(0, |n| n.sum)
    }

    /// Recomputes `count` and `sum` of node `i` from its children.
    fn pull(&mut self, i: usize) {
        let (l, r) = match self.nodes.get(i) {
            Some(n) => (n.left, n.right),
            None => return,
        };
        let count = 1 + self.count(l) + self.count(r);
        let sum = self.sum(l) + self.sum(r);
        if let Some(n) = self.nodes.get_mut(i) {
            n.count = count;
            n.sum = sum + u128::from(n.value);
        }
    }

    /// Splits the subtree at `i` into keys `< (value, seq)` and keys `≥`.
    fn split(&mut self, i: usize, key: (u64, u64)) -> (usize, usize) {
        let Some(n) = self.nodes.get(i) else {
            return (NIL, NIL);
        };
        let (left, right) = (n.left, n.right);
        if (n.value, n.seq) < key {
            let (a, b) = self.split(right, key);
            if let Some(n) = self.nodes.get_mut(i) {
                n.right = a;
            }
            self.pull(i);
            (i, b)
        } else {
            let (a, b) = self.split(left, key);
            if let Some(n) = self.nodes.get_mut(i) {
                n.left = b;
            }
            self.pull(i);
            (a, i)
        }
    }

    /// Joins two subtrees where every key of `a` is below every key of `b`.
    fn merge(&mut self, a: usize, b: usize) -> usize {
        let (pa, pb) = match (self.nodes.get(a), self.nodes.get(b)) {
            (None, _) => return b,
            (_, None) => return a,
            (Some(x), Some(y)) => (x.prio, y.prio),
        };
        // Indexing below is in bounds: `a` and `b` were just found live.
        if pa >= pb {
            let ar = self.nodes[a].right;
            let m = self.merge(ar, b);
            self.nodes[a].right = m;
            self.pull(a);
            a
        } else {
            let bl = self.nodes[b].left;
            let m = self.merge(a, bl);
            self.nodes[b].left = m;
            self.pull(b);
            b
        }
    }

    /// Inserts `value` under the unique tag `seq`.
    pub(crate) fn insert(&mut self, value: u64, seq: u64) {
        let node = Node {
            value,
            seq,
            prio: splitmix64(seq),
            left: NIL,
            right: NIL,
            count: 1,
            sum: u128::from(value),
        };
        let idx = match self.free.pop() {
            Some(slot) => {
                // Free slots are indices of removed nodes, always < len.
                self.nodes[slot] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        let (l, r) = self.split(self.root, (value, seq));
        let lm = self.merge(l, idx);
        self.root = self.merge(lm, r);
    }

    /// Removes the entry `(value, seq)`; returns whether it was present.
    pub(crate) fn remove(&mut self, value: u64, seq: u64) -> bool {
        let (l, r) = self.split(self.root, (value, seq));
        // The successor key of (value, seq); (value, u64::MAX) has none, in
        // which case everything in `r` with this value is the one entry.
        let (mid, rest) = match seq.checked_add(1) {
            Some(next) => self.split(r, (value, next)),
            None => match value.checked_add(1) {
                Some(v) => self.split(r, (v, 0)),
                None => (r, NIL),
            },
        };
        let found = mid != NIL;
        if found {
            // `mid` holds exactly one node: keys are unique.
            self.free.push(mid);
        }
        self.root = self.merge(l, rest);
        found
    }

    /// The value of rank `k` (0-based, ascending), or `None` if `k ≥ len`.
    pub(crate) fn select(&self, mut k: usize) -> Option<u64> {
        let mut i = self.root;
        while let Some(n) = self.nodes.get(i) {
            let lc = self.count(n.left);
            if k < lc {
                i = n.left;
            } else if k == lc {
                return Some(n.value);
            } else {
                k -= lc + 1;
                i = n.right;
            }
        }
        None
    }

    /// Count and sum of the values `≤ b` (`inclusive`) or `< b`.
    pub(crate) fn prefix(&self, b: u64, inclusive: bool) -> (usize, u128) {
        let (mut count, mut sum) = (0usize, 0u128);
        let mut i = self.root;
        while let Some(n) = self.nodes.get(i) {
            let goes_left_of_b = if inclusive { n.value <= b } else { n.value < b };
            if goes_left_of_b {
                count += self.count(n.left) + 1;
                sum += self.sum(n.left) + u128::from(n.value);
                i = n.right;
            } else {
                i = n.left;
            }
        }
        (count, sum)
    }

    /// Height of the tree (for tests of balance).
    #[cfg(test)]
    pub(crate) fn height(&self) -> usize {
        fn h(t: &OrderTree, i: usize) -> usize {
            t.nodes
                .get(i)
                .map_or(0, |n| 1 + h(t, n.left).max(h(t, n.right)))
        }
        h(self, self.root)
    }

    /// Checks every invariant (for tests).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        fn walk(t: &OrderTree, i: usize, lo: Option<(u64, u64)>, hi: Option<(u64, u64)>) -> usize {
            let Some(n) = t.nodes.get(i) else { return 0 };
            let key = (n.value, n.seq);
            assert!(lo.is_none_or(|l| l < key) && hi.is_none_or(|h| key < h));
            for c in [n.left, n.right] {
                if let Some(child) = t.nodes.get(c) {
                    assert!(child.prio <= n.prio, "heap order");
                }
            }
            let c = 1 + walk(t, n.left, lo, Some(key)) + walk(t, n.right, Some(key), hi);
            assert_eq!(c, n.count);
            assert_eq!(n.sum, t.sum(n.left) + t.sum(n.right) + u128::from(n.value));
            c
        }
        walk(self, self.root, None, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_select_remove() {
        let mut t = OrderTree::with_capacity(8);
        for (seq, v) in [5u64, 1, 9, 5, 3].into_iter().enumerate() {
            t.insert(v, seq as u64);
            t.check();
        }
        assert_eq!(t.len(), 5);
        let sorted: Vec<u64> = (0..5).filter_map(|k| t.select(k)).collect();
        assert_eq!(sorted, vec![1, 3, 5, 5, 9]);
        assert_eq!(t.select(5), None);
        assert_eq!(t.prefix(5, true), (4, 14));
        assert_eq!(t.prefix(5, false), (2, 4));
        assert!(t.remove(5, 0));
        assert!(!t.remove(5, 0));
        t.check();
        assert_eq!(t.prefix(5, true), (3, 9));
        assert_eq!(t.total(), 18);
    }

    #[test]
    fn extreme_keys() {
        let mut t = OrderTree::with_capacity(2);
        t.insert(u64::MAX, u64::MAX);
        t.insert(u64::MAX, 0);
        assert!(t.remove(u64::MAX, u64::MAX));
        assert_eq!(t.len(), 1);
        assert_eq!(t.total(), u128::from(u64::MAX));
        t.check();
    }

    #[test]
    fn stays_shallow_on_sorted_input() {
        let mut t = OrderTree::with_capacity(1 << 14);
        for i in 0..(1u64 << 14) {
            t.insert(i, i);
        }
        t.check();
        // A treap of 16k nodes has expected depth ≈ 2·ln n ≈ 20.
        assert!(t.height() < 60, "height {}", t.height());
        // The arena never grows past the live size when slots are reused.
        for i in 0..(1u64 << 14) {
            assert!(t.remove(i, i));
            t.insert(i + 100, i + (1 << 20));
        }
        assert_eq!(t.nodes.len(), 1 << 14);
    }
}
