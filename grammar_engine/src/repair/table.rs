//! The node table: per search node `(i, s)`, its best cost, how it was reached, and flags.
//!
//! Both directions of the search keep one (a [`Node`] per node, behind the [`Table`] trait),
//! so it is the search's main memory. Two layouts share the trait: dense parallel arrays over
//! `(len + 1) * num_states` for short texts and small DFAs, and a hash map keyed by the packed
//! `(i, s)` otherwise; the caller picks one per call (see [`DENSE_MAX_ENTRIES`]).

use crate::util::int_hash::IntMap;
use crate::util::StateId;

use super::cost::INF;

/// Largest `(len + 1) * num_states` for the dense node table (16 bytes per entry). Past this a
/// hash map is faster: the search touches few states per position, and a dense row per
/// position costs page faults.
pub(super) const DENSE_MAX_ENTRIES: usize = 1 << 16;

/// How a node was reached (forward table) or how it continues to a goal (backward table).
pub(super) const OP_NONE: u8 = 0;
pub(super) const OP_KEEP: u8 = 1;
pub(super) const OP_DELETE: u8 = 2;
pub(super) const OP_SUBSTITUTE: u8 = 3;
pub(super) const OP_INSERT: u8 = 4;

/// Memoized outcome of keeping the whole rest of the text from a node (the "keep chain").
pub(super) const CHAIN_UNKNOWN: u8 = 0;
pub(super) const CHAIN_OK: u8 = 1;
pub(super) const CHAIN_FAIL: u8 = 2;

#[derive(Debug, Clone, Copy)]
pub(super) struct Node {
    /// Best internal cost found so far from the start, `INF` when unseen.
    pub(super) g: u64,
    /// The predecessor's state; its position follows from `op`.
    pub(super) parent: StateId,
    pub(super) op: u8,
    pub(super) byte: u8,
    pub(super) closed: bool,
    pub(super) chain: u8,
}

pub(super) const UNSEEN: Node = Node { g: INF, parent: StateId::new(0), op: OP_NONE, byte: 0, closed: false, chain: CHAIN_UNKNOWN };

pub(super) trait Table {
    /// A table for `positions * num_states` nodes.
    fn with_size(num_states: usize, positions: usize) -> Self;
    fn get(&self, i: u32, s: StateId) -> Node;
    fn set(&mut self, i: u32, s: StateId, node: Node);
}

/// Parallel arrays whose all-zero value means "unseen", so the allocator can hand out lazily
/// zeroed pages.
pub(super) struct DenseTable {
    num_states: usize,
    /// `g + 1`, 0 when unseen.
    g1: Vec<u64>,
    /// Each node's `Node::parent`, as plain `u32`s so the table starts as zeroed memory.
    parent: Vec<u32>,
    /// `op | byte << 8 | closed << 16 | chain << 17`.
    meta: Vec<u32>,
}

impl Table for DenseTable {
    fn with_size(num_states: usize, positions: usize) -> Self {
        let entries = num_states * positions;
        DenseTable { num_states, g1: vec![0; entries], parent: vec![0; entries], meta: vec![0; entries] }
    }

    #[inline]
    fn get(&self, i: u32, s: StateId) -> Node {
        let k = i as usize * self.num_states + s.as_usize();
        let m = self.meta[k];
        Node {
            g: self.g1[k].wrapping_sub(1),
            parent: StateId::new(self.parent[k]),
            op: m as u8,
            byte: (m >> 8) as u8,
            closed: (m >> 16) & 1 == 1,
            chain: ((m >> 17) & 3) as u8,
        }
    }

    #[inline]
    fn set(&mut self, i: u32, s: StateId, node: Node) {
        let k = i as usize * self.num_states + s.as_usize();
        self.g1[k] = node.g.wrapping_add(1);
        self.parent[k] = node.parent.as_u32();
        self.meta[k] =
            node.op as u32 | (node.byte as u32) << 8 | (node.closed as u32) << 16 | (node.chain as u32) << 17;
    }
}

#[derive(Default)]
pub(super) struct SparseTable(IntMap<u64, Node>);

impl Table for SparseTable {
    fn with_size(_num_states: usize, _positions: usize) -> Self {
        SparseTable::default()
    }

    #[inline]
    fn get(&self, i: u32, s: StateId) -> Node {
        self.0.get(&((i as u64) << 32 | s.as_u32() as u64)).copied().unwrap_or(UNSEEN)
    }

    #[inline]
    fn set(&mut self, i: u32, s: StateId, node: Node) {
        self.0.insert((i as u64) << 32 | s.as_u32() as u64, node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(n: Node) -> (u64, StateId, u8, u8, bool, u8) {
        (n.g, n.parent, n.op, n.byte, n.closed, n.chain)
    }

    /// Both layouts start unseen everywhere and give back every field they are given.
    fn round_trip<T: Table>() {
        let (two, three) = (StateId::new(2), StateId::new(3));
        let mut t = T::with_size(3, 4);
        assert_eq!(fields(t.get(3, two)), fields(UNSEEN));
        let node = Node { g: 7 << 32 | 5, parent: two, op: OP_SUBSTITUTE, byte: 0xff, closed: true, chain: CHAIN_FAIL };
        t.set(3, two, node);
        assert_eq!(fields(t.get(3, two)), fields(node));
        assert_eq!(fields(t.get(2, three)), fields(UNSEEN));
        let reopened = Node { g: 0, closed: false, chain: CHAIN_OK, ..node };
        t.set(3, two, reopened);
        assert_eq!(fields(t.get(3, two)), fields(reopened));
    }

    #[test]
    fn dense_round_trip() {
        round_trip::<DenseTable>();
    }

    #[test]
    fn sparse_round_trip() {
        round_trip::<SparseTable>();
    }
}
