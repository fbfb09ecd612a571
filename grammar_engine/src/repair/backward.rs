//! The backward phase: Dijkstra from the goals over reversed moves, and the heuristic it gives.
//!
//! The forward search alone is fast when the errors are cheap to prove optimal, but weak when
//! the repair is expensive and far from where the search starts (a truncated text needs many
//! insertions at the very end, and every cheap detour at every position looks promising).
//! So when the forward search exceeds its allowance, it alternates with a backward Dijkstra
//! from the goals over reversed moves (predecessor lists built once per call from the grouped
//! transitions), doubling both allowances each round.
//!
//! The backward phase skips nodes that cannot beat the incumbent: `H + h_rev >= incumbent`,
//! where `H` is the exact cost-to-go and `h_rev(i, s)` bounds the cost from the start (0 on the
//! text's valid prefix, else one edit, and at least the insertions that the distance from the
//! start to `s` demands). It stops the whole search when it closes the start node (whose `H`
//! is then the optimum) or when its radius reaches the incumbent's cost. Every node it closes
//! that the forward search has reached gives a complete solution (meet in the middle).
//!
//! # The heuristic it gives: `h_back`
//!
//! The forward heuristic takes `h_back` into its max: the exact cost-to-go `H(i, s)` for nodes
//! the backward phase has closed, and its radius `R` for all others. It is a perimeter
//! heuristic: Dijkstra closes nodes in order of `H`, so every node it has not closed has
//! `H >= R` and every closed one `H <= R`, which makes the mix of exact values and `R`
//! consistent (with the move `n -> m` of cost `c`: `H(n) <= c + H(m)` for exact values,
//! `H(n) <= R <= c + R` from closed to open, and `R` against `R` for open nodes). (Nodes the
//! backward phase skipped as useless may get a value above their `H`; no repair cheaper than
//! the incumbent passes through them, so the optimum and the lower bounds are unaffected.)
//! Raising the heuristic mid-search is sound: open entries are re-filed with their new `f`
//! when they surface.

use std::collections::BinaryHeap;

use super::cost::{hi, insert_class, special_target, Weights, INF};
use super::search::{Completion, Search, Stop};
use super::table::{Table, OP_DELETE, OP_INSERT, OP_KEEP, OP_NONE, OP_SUBSTITUTE};
use crate::util::StateId;

/// `Backward::from_start` of a state the breadth-first walk from the start has not reached.
const UNREACHED: u32 = u32::MAX;

/// Backward heap key: smallest cost-to-go first, then smallest `i` (dive toward the start).
#[inline]
fn back_key(g: u64, i: u32, s: StateId) -> u128 {
    ((!g as u128) << 64) | ((!i as u128) << 32) | s.as_u32() as u128
}

#[inline]
fn back_unkey(k: u128) -> (u64, u32, StateId) {
    (!((k >> 64) as u64), !((k >> 32) as u32), StateId::new(k as u32))
}

/// The backward phase: Dijkstra from the goals over reversed moves, computing exact
/// costs-to-go. Once it stops, every node whose cost-to-go is below `radius` is closed (or is
/// useless: it cannot lie on a repair cheaper than the incumbent), so the forward heuristic may
/// use the exact cost-to-go of closed nodes and `radius` for all others.
pub(super) struct Backward<T> {
    pub(super) table: T,
    heap: BinaryHeap<u128>,
    /// Predecessors of each state as CSR: `(p, byte)` for each group `p --byte--> t`.
    pred_off: Vec<u32>,
    pred: Vec<(StateId, u8)>,
    /// Fewest bytes from the start to each state.
    from_start: Vec<u32>,
    /// `main[i]`: the state after keeping `text[..i]`, for the longest prefix that survives.
    main: Vec<StateId>,
    pub(super) radius: u64,
}

impl<T: Table> Search<'_, T> {
    /// Starts the backward phase: builds the predecessor lists, each state's distance from the
    /// start and the states along the text's valid prefix, and opens every goal.
    pub(super) fn start_backward(&mut self) {
        let dfa = self.dfa;
        let n = dfa.num_states();
        let start = dfa.start();
        let mut pred_off = vec![0u32; n + 1];
        for p in 0..n {
            for k in self.groups.range(dfa, StateId::from_index(p)) {
                pred_off[self.groups.pool[k].0.as_usize() + 1] += 1;
            }
        }
        for t in 0..n {
            pred_off[t + 1] += pred_off[t];
        }
        let mut cursor = pred_off.clone();
        let mut pred = vec![(StateId::DEAD, 0u8); pred_off[n] as usize];
        for p in (0..n).map(StateId::from_index) {
            for k in self.groups.range(dfa, p) {
                let (t, rep) = self.groups.pool[k];
                pred[cursor[t.as_usize()] as usize] = (p, rep);
                cursor[t.as_usize()] += 1;
            }
        }
        let mut from_start = vec![UNREACHED; n];
        from_start[start.as_usize()] = 0;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for k in self.groups.range(dfa, s) {
                let t = self.groups.pool[k].0;
                if from_start[t.as_usize()] == UNREACHED {
                    from_start[t.as_usize()] = from_start[s.as_usize()] + 1;
                    queue.push_back(t);
                }
            }
        }
        let mut main = vec![start];
        let mut s = start;
        for &b in self.text {
            s = dfa.next(s, b);
            if s.is_dead() {
                break;
            }
            main.push(s);
        }
        let mut back = Backward {
            table: T::with_size(n, self.text.len() + 1),
            heap: BinaryHeap::new(),
            pred_off,
            pred,
            from_start,
            main,
            radius: 0,
        };
        for a in (0..n).map(StateId::from_index) {
            if dfa.is_accepting(a) {
                self.relax_back(&mut back, self.len, a, 0, a, OP_NONE, 0);
            }
        }
        self.back = Some(back);
    }

    /// A lower bound on the cost of reaching `(i, s)` from the start: 0 on the text's valid
    /// prefix, otherwise at least one edit, and at least the insertions the distance from the
    /// start demands.
    #[inline]
    fn h_rev(&self, back: &Backward<T>, i: u32, s: StateId) -> u64 {
        if back.main.get(i as usize) == Some(&s) {
            return 0;
        }
        let missing = back.from_start[s.as_usize()].saturating_sub(i);
        self.min_edit.max(hi(Weights::cost_bound(self.w.min_insert()) as u64 * missing as u64))
    }

    /// Backward relaxation: a path of internal cost `g` from `(i, s)` to a goal whose first
    /// move (`op`, `byte`) leads to state `succ`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn relax_back(&self, back: &mut Backward<T>, i: u32, s: StateId, g: u64, succ: StateId, op: u8, byte: u8) {
        let mut node = back.table.get(i, s);
        if node.closed || g >= node.g {
            return;
        }
        if g.saturating_add(self.h_rev(back, i, s)) >= self.bound {
            return; // useless: every repair through it costs at least the incumbent
        }
        node.g = g;
        node.parent = succ;
        node.op = op;
        node.byte = byte;
        back.table.set(i, s, node);
        back.heap.push(back_key(g, i, s));
    }

    /// Backward Dijkstra until `limit` backward expansions in all. `Exhausted` means the
    /// incumbent is proven optimal.
    pub(super) fn backward(&mut self, limit: usize) -> Stop {
        let mut back = self.back.take().expect("backward phase started");
        let stop = self.backward_steps(&mut back, limit);
        self.back = Some(back);
        match stop {
            Stop::Budget(_) => {
                let f = self.peek_live().map_or(self.best, |(f, ..)| f);
                Stop::Budget(self.lower_bound(f))
            }
            other => other,
        }
    }

    fn backward_steps(&mut self, back: &mut Backward<T>, limit: usize) -> Stop {
        let dfa = self.dfa;
        let start = dfa.start();
        loop {
            let Some(&top) = back.heap.peek() else {
                back.radius = INF;
                return Stop::Exhausted;
            };
            let (g, i, t) = back_unkey(top);
            let mut node = back.table.get(i, t);
            if node.closed || node.g != g {
                back.heap.pop();
                continue;
            }
            back.radius = g;
            if g >= self.bound {
                return Stop::Exhausted;
            }
            if self.budget_exhausted() {
                return Stop::Budget(0);
            }
            if self.back_expansions >= limit {
                return Stop::Phase;
            }
            back.heap.pop();
            node.closed = true;
            back.table.set(i, t, node);
            self.back_expansions += 1;
            let fwd = self.table.get(i, t);
            if fwd.g != INF {
                self.offer(fwd.g.saturating_add(g), i, t, Completion::Backward);
            }
            if i == 0 && t == start {
                return Stop::Exhausted; // g is the exact optimum, and it was just offered
            }
            let w = self.w;
            let preds = back.pred_off[t.as_usize()] as usize..back.pred_off[t.as_usize() + 1] as usize;
            if i > 0 {
                let x = self.text[i as usize - 1];
                let class_t = self.groups.class(dfa, t);
                self.relax_back(
                    back,
                    i - 1,
                    t,
                    g.saturating_add(w.delete(class_t, x, i as usize - 1)),
                    t,
                    OP_DELETE,
                    0,
                );
                let special = special_target(x);
                for k in preds.clone() {
                    let (p, rep) = back.pred[k];
                    let class = self.groups.class(dfa, p);
                    if dfa.next(p, x) == t {
                        let keep = self.keep[i as usize - 1];
                        self.relax_back(back, i - 1, p, g.saturating_add(keep), t, OP_KEEP, x);
                        if let Some(sb) = special.filter(|&sb| keep > 0 && dfa.next(p, sb) == t) {
                            let c = g.saturating_add(w.substitute(class, x, sb));
                            self.relax_back(back, i - 1, p, c, t, OP_SUBSTITUTE, sb);
                        }
                    } else {
                        let (mut c, mut byte) = (w.substitute(class, x, rep), rep);
                        if let Some(sb) = special.filter(|&sb| dfa.next(p, sb) == t) {
                            let cs = w.substitute(class, x, sb);
                            if cs < c {
                                (c, byte) = (cs, sb);
                            }
                        }
                        self.relax_back(back, i - 1, p, g.saturating_add(c), t, OP_SUBSTITUTE, byte);
                    }
                }
            }
            for k in preds {
                let (p, rep) = back.pred[k];
                if p != t {
                    let byte = match self.text.get(i as usize) {
                        Some(&b) if dfa.next(p, b) == t && insert_class(b) == insert_class(rep) => b,
                        _ => rep,
                    };
                    let class = self.groups.class(dfa, p);
                    self.relax_back(back, i, p, g.saturating_add(w.insert(class, byte)), t, OP_INSERT, byte);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::repair::test_support::*;
    use crate::repair::{repair, repair_impl, EditKind, RepairOptions, RepairStatus, Tuning};

    /// A truncated text (the costly case for the forward search alone: every position allows
    /// cheap detours) is repaired by appending the missing closers.
    #[test]
    fn truncated_json_is_completed() {
        let d = json_object_dfa();
        let valid = long_json(30, false);
        let cut = &valid[..valid.len() - 20];
        let opts = RepairOptions::default();
        let r = repair(&d, cut.as_bytes(), &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        let out = check(&d, cut.as_bytes(), &opts, &r);
        assert!(out.starts_with(cut.as_bytes()));
        assert!(r.edits.iter().all(|e| e.kind == EditKind::Insert && e.offset == cut.len()));
        assert_eq!(r.cost, Some(2)); // `"}`
        let forward_only = Tuning { forward_first: usize::MAX / 4, ..Tuning::for_len(cut.len()) };
        assert_eq!(repair_impl(&d, cut.as_bytes(), &opts, forward_only).cost, r.cost);
    }

    /// Budgets that run out in either phase still give a valid text and a sound lower bound.
    #[test]
    fn budgets_in_both_phases() {
        let d = json_object_dfa();
        let mut text = long_json(12, true);
        text.truncate(text.len() - 9);
        text.insert_str(0, "Result: ");
        let bytes = text.as_bytes();
        let optimum = repair(&d, bytes, &RepairOptions::default()).cost.unwrap();
        assert_eq!(Some(optimum), Some(reference_cost(&d, bytes, &RepairOptions::default())));
        for tuning in [Tuning::for_len(bytes.len()), Tuning { forward_first: 5, backward_first: 5, sparse: false }] {
            for budget in [0, 1, 3, 10, 30, 100, 300, 1000, 3000] {
                let opts = RepairOptions { max_expansions: Some(budget), ..RepairOptions::default() };
                let r = repair_impl(&d, bytes, &opts, tuning);
                assert!(matches!(r.status, RepairStatus::Anytime | RepairStatus::Optimal), "{budget} {:?}", r.status);
                assert!(r.expansions <= budget);
                let cost = r.cost.unwrap();
                check(&d, bytes, &opts, &r);
                assert!(
                    r.lower_bound <= optimum && optimum <= cost,
                    "{budget} {tuning:?}: {} {optimum} {cost}",
                    r.lower_bound
                );
                if r.status == RepairStatus::Optimal {
                    assert_eq!(cost, optimum);
                }
            }
        }
    }
}
