//! Path reconstruction: from the node tables' parent links to the edits, and to the answer.
//!
//! The search only records, per node, the move that reached it (forward table) or the move
//! that continues it to a goal (backward table). The incumbent is a node plus a way to
//! complete it, so its edits are the forward path to the node, then either the greedy tail or
//! the backward path to a goal. [`finish`] then applies the edits and prices them.

use super::cost::Weights;
use super::greedy::greedy_tail;
use super::groups::Groups;
use super::search::{Completion, Search};
use super::table::{Table, OP_DELETE, OP_KEEP, OP_NONE, OP_SUBSTITUTE};
use super::{Edit, EditKind, RepairResult, RepairStatus};
use crate::automata::Dfa;
use crate::util::StateId;

/// The text with `edits` (in text order) applied.
fn apply(text: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut pos = 0;
    for e in edits {
        out.extend_from_slice(&text[pos..e.offset]);
        pos = e.offset;
        match e.kind {
            EditKind::Insert => out.push(e.new.expect("insert has a byte")),
            EditKind::Delete => pos += 1,
            EditKind::Substitute => {
                out.push(e.new.expect("substitute has a byte"));
                pos += 1;
            }
        }
    }
    out.extend_from_slice(&text[pos..]);
    out
}

/// The internal cost of the path `edits` describes: each move priced from the state it leaves,
/// keeps included.
pub(super) fn price(dfa: &Dfa, text: &[u8], groups: &mut Groups, w: &Weights, keep: &[u64], edits: &[Edit]) -> u64 {
    let (mut total, mut s, mut pos) = (0u64, dfa.start(), 0usize);
    let keep_to = |s: &mut StateId, pos: &mut usize, end: usize, total: &mut u64| {
        while *pos < end {
            *total = total.saturating_add(keep[*pos]);
            *s = dfa.next(*s, text[*pos]);
            *pos += 1;
        }
    };
    for e in edits {
        keep_to(&mut s, &mut pos, e.offset, &mut total);
        if s.is_dead() {
            return u64::MAX;
        }
        let class = groups.class(dfa, s);
        match e.kind {
            EditKind::Insert => {
                let b = e.new.expect("insert has a byte");
                total = total.saturating_add(w.insert(class, b));
                s = dfa.next(s, b);
            }
            EditKind::Delete => {
                total = total.saturating_add(w.delete(class, text[pos], pos));
                pos += 1;
            }
            EditKind::Substitute => {
                let b = e.new.expect("substitute has a byte");
                total = total.saturating_add(w.substitute(class, text[pos], b));
                s = dfa.next(s, b);
                pos += 1;
            }
        }
    }
    keep_to(&mut s, &mut pos, text.len(), &mut total);
    total
}

/// Builds the result for a solution given by its edits.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    dfa: &Dfa,
    text: &[u8],
    groups: &mut Groups,
    w: &Weights,
    keep: &[u64],
    status: RepairStatus,
    lower_bound: u32,
    edits: Vec<Edit>,
    expansions: usize,
) -> RepairResult {
    let cost = Weights::cost_bound(price(dfa, text, groups, w, keep, &edits));
    let out = apply(text, &edits);
    debug_assert!({
        let s = dfa.walk(dfa.start(), &out);
        !s.is_dead() && dfa.is_accepting(s)
    });
    let (status, lower_bound) = match status {
        RepairStatus::Optimal => (status, cost),
        _ if lower_bound >= cost => (RepairStatus::Optimal, cost),
        _ => (status, lower_bound),
    };
    RepairResult { status, text: Some(out), cost: Some(cost), lower_bound, edits, expansions }
}

impl<T: Table> Search<'_, T> {
    /// The edits of the recorded forward path from the start to `(i, s)`.
    fn path_edits(&self, mut i: u32, mut s: StateId) -> Vec<Edit> {
        let mut edits = Vec::new();
        loop {
            let node = self.table.get(i, s);
            match node.op {
                OP_NONE => break,
                OP_KEEP => i -= 1,
                OP_DELETE => {
                    i -= 1;
                    let old = Some(self.text[i as usize]);
                    edits.push(Edit { kind: EditKind::Delete, offset: i as usize, old, new: None });
                }
                OP_SUBSTITUTE => {
                    i -= 1;
                    let old = Some(self.text[i as usize]);
                    edits.push(Edit { kind: EditKind::Substitute, offset: i as usize, old, new: Some(node.byte) });
                }
                _ => {
                    edits.push(Edit { kind: EditKind::Insert, offset: i as usize, old: None, new: Some(node.byte) });
                }
            }
            s = node.parent;
        }
        edits.reverse();
        edits
    }

    /// Appends the edits of the backward search's path from `(i, s)` to a goal.
    fn backward_edits(&self, mut i: u32, mut s: StateId, edits: &mut Vec<Edit>) {
        let back = self.back.as_ref().expect("backward phase ran");
        loop {
            let node = back.table.get(i, s);
            let offset = i as usize;
            match node.op {
                OP_NONE => break,
                OP_KEEP => i += 1,
                OP_DELETE => {
                    edits.push(Edit { kind: EditKind::Delete, offset, old: Some(self.text[offset]), new: None });
                    i += 1;
                }
                OP_SUBSTITUTE => {
                    let old = Some(self.text[offset]);
                    edits.push(Edit { kind: EditKind::Substitute, offset, old, new: Some(node.byte) });
                    i += 1;
                }
                _ => edits.push(Edit { kind: EditKind::Insert, offset, old: None, new: Some(node.byte) }),
            }
            s = node.parent;
        }
    }

    /// All edits of the incumbent: the forward path to its node, then the node's completion.
    pub(super) fn incumbent_edits(&mut self) -> Vec<Edit> {
        let (i, s, how) = self.incumbent.expect("an incumbent exists");
        let mut edits = self.path_edits(i, s);
        match how {
            Completion::Greedy => {
                greedy_tail(self.dfa, self.text, &mut self.groups, &self.w, &self.keep, i as usize, s, &mut edits);
            }
            Completion::Backward => self.backward_edits(i, s, &mut edits),
        }
        edits
    }
}
