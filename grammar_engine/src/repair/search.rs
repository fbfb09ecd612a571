//! The forward A* search, and the driver that alternates it with the backward phase.
//!
//! A* over the nodes `(i, s)` and moves described in the `repair` module documentation,
//! minimizing the internal cost of [`Weights`]. A node whose keep chain succeeds, or whose
//! exact cost-to-go the backward phase knows, is a complete solution; it becomes the incumbent
//! without being expanded. Nodes with `f >= incumbent` are pruned, and so are nodes with
//! `f > max_cost`.
//!
//! # Heuristic
//!
//! `h(i, s) = max(h_ins, h_chain, h_back)`, each consistent (so their max is too, and a closed
//! node is never reopened):
//!
//! * `h_ins = min_insert * max(0, byte_distance(s) - (len - i))`, with `min_insert` the cheapest
//!   insertion anywhere. Reaching acceptance from `s`
//!   emits at least `byte_distance(s)` more bytes; keeps and substitutions emit one byte per
//!   remaining text byte (at most `len - i` of them), deletions none, so the rest must be
//!   insertions. Consistency, per move (`d` = byte distance, `r = len - i`): a keep or a
//!   substitution lowers `r` by one and `d` by at most one, a deletion lowers `r` by one and
//!   keeps `d`, so `d - r` never decreases and `h_ins` never drops; an insertion keeps `r` and
//!   lowers `d` by at most one, so `h_ins` drops by at most `min_insert`, at most the move's cost.
//!   At a goal `d = 0`, so `h_ins = 0`.
//! * `h_chain = ` the cheapest single edit anywhere, when keeping the whole rest of the text
//!   from `(i, s)` does not end in an accepting state (the "keep chain" dies or stops short),
//!   else 0. If the chain fails, any completion makes at least one edit, so the bound holds.
//!   Consistency: keep moves follow the same deterministic chain, so both ends have the same
//!   value; every other move costs at least the minimum edit cost, which is all `h_chain` can
//!   drop. Chain outcomes are memoized in the node table, so each `(i, s)` is walked at most
//!   once per call. (A successful chain is a complete solution of cost `g` plus the price of
//!   keeping the rest, which is 0 except for the intent model's quote-like `'`s; only when it
//!   is 0 is the node left unexpanded, since otherwise an edit might beat keeping.)
//! * `h_back` comes from the backward phase (see `backward`).
//!
//! # Bounds and anytime behaviour
//!
//! When the deadline or the expansion budget (counting both directions) runs out, the open
//! nodes with the smallest `f` and the deepest expanded node are completed greedily, and the
//! best complete solution is returned together with a proven lower bound: the smallest open
//! `f`, or the backward radius if larger. The search space is finite, so the search always
//! terminates.

use std::collections::BinaryHeap;
use std::time::Instant;

use super::backward::Backward;
use super::cost::{hi, insert_class, special_target, Weights, INF};
use super::greedy::greedy_tail;
use super::groups::Groups;
use super::path::finish;
use super::table::{
    Node, Table, CHAIN_FAIL, CHAIN_OK, CHAIN_UNKNOWN, OP_DELETE, OP_INSERT, OP_KEEP, OP_SUBSTITUTE, UNSEEN,
};
use super::{RepairOptions, RepairResult, RepairStatus, Tuning};
use crate::automata::Dfa;
use crate::util::StateId;

/// Expansions between two reads of the clock.
const CLOCK_EVERY: usize = 64;

/// Forward heap key: smallest `f` first, then deepest `i`.
#[inline]
fn key(f: u64, i: u32, s: StateId) -> u128 {
    ((!f as u128) << 64) | ((i as u128) << 32) | s.as_u32() as u128
}

#[inline]
fn unkey(k: u128) -> (u64, u32, StateId) {
    (!((k >> 64) as u64), (k >> 32) as u32, StateId::new(k as u32))
}

/// How an incumbent node is completed into a full repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Completion {
    /// [`greedy_tail`] (exact when the node's keep chain succeeds).
    Greedy,
    /// The backward search's optimal path from the node to a goal.
    Backward,
}

/// Why a phase of the search returned.
pub(super) enum Stop {
    /// Every useful node was expanded: the incumbent (if within `max_cost`) is optimal.
    Exhausted,
    /// The caller's budget ran out; the argument is a proven lower bound (internal units).
    Budget(u64),
    /// The current phase's own expansion allowance ran out.
    Phase,
}

/// The state of one repair call: both directions' tables and heaps, the incumbent, budgets.
/// The backward phase, greedy completion and path reconstruction add methods in their files.
pub(super) struct Search<'a, T: Table> {
    pub(super) dfa: &'a Dfa,
    pub(super) text: &'a [u8],
    pub(super) len: u32,
    pub(super) opts: &'a RepairOptions,
    pub(super) w: Weights,
    /// The internal price of keeping each text byte, and of keeping each suffix.
    pub(super) keep: Vec<u64>,
    keep_rest: Vec<u64>,
    pub(super) table: T,
    pub(super) groups: Groups,
    pub(super) heap: BinaryHeap<u128>,
    pub(super) back: Option<Backward<T>>,
    /// The cheapest single edit (internal cost): the chain heuristic's value.
    pub(super) min_edit: u64,
    /// Internal cost of the incumbent (`INF` when none).
    pub(super) best: u64,
    /// The incumbent: a node, completed as said, for a total internal cost of `best`.
    pub(super) incumbent: Option<(u32, StateId, Completion)>,
    /// Smallest internal cost whose cost exceeds `max_cost` (`INF` without one).
    cost_cap: u64,
    /// Nodes with `f >= bound` are pruned: `min(best, cost_cap)`.
    pub(super) bound: u64,
    chain_buf: Vec<(u32, StateId)>,
    fwd_expansions: usize,
    pub(super) back_expansions: usize,
    deadline: Option<Instant>,
    /// Deepest expanded node (largest `i`, then smallest `g`): `(i, g, s)`.
    pub(super) deepest: (u32, u64, StateId),
}

impl<'a, T: Table> Search<'a, T> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        dfa: &'a Dfa,
        text: &'a [u8],
        opts: &'a RepairOptions,
        w: Weights,
        groups: Groups,
        keep: Vec<u64>,
        keep_rest: Vec<u64>,
        started: Instant,
    ) -> Self {
        let cost_cap = opts.max_cost.map_or(INF, |c| hi(c as u64 + 1));
        Search {
            dfa,
            text,
            len: text.len() as u32,
            opts,
            w,
            keep,
            keep_rest,
            table: T::with_size(dfa.num_states(), text.len() + 1),
            groups,
            heap: BinaryHeap::new(),
            back: None,
            min_edit: w.min_edit(),
            best: INF,
            incumbent: None,
            cost_cap,
            bound: cost_cap,
            chain_buf: Vec::new(),
            fwd_expansions: 0,
            back_expansions: 0,
            deadline: opts.deadline.map(|d| started + d),
            deepest: (0, 0, dfa.start()),
        }
    }

    pub(super) fn expansions(&self) -> usize {
        self.fwd_expansions + self.back_expansions
    }

    pub(super) fn offer(&mut self, cost: u64, i: u32, s: StateId, how: Completion) {
        if cost < self.best {
            self.best = cost;
            self.incumbent = Some((i, s, how));
            self.bound = self.best.min(self.cost_cap);
        }
    }

    pub(super) fn budget_exhausted(&self) -> bool {
        let n = self.expansions();
        if let Some(max) = self.opts.max_expansions {
            if n >= max {
                return true;
            }
        }
        if let Some(d) = self.deadline {
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() >= d {
                return true;
            }
        }
        false
    }

    /// Whether keeping all of `text[i..]` from `s` ends in an accepting state; memoized for
    /// every node of the walk.
    fn chain(&mut self, i: u32, s: StateId) -> u8 {
        let (mut i, mut s) = (i, s);
        self.chain_buf.clear();
        let outcome = loop {
            let node = self.table.get(i, s);
            if node.chain != CHAIN_UNKNOWN {
                break node.chain;
            }
            self.chain_buf.push((i, s));
            if i == self.len {
                break if self.dfa.is_accepting(s) { CHAIN_OK } else { CHAIN_FAIL };
            }
            let t = self.dfa.next(s, self.text[i as usize]);
            if t.is_dead() {
                break CHAIN_FAIL;
            }
            i += 1;
            s = t;
        };
        for k in 0..self.chain_buf.len() {
            let (i, s) = self.chain_buf[k];
            let mut node = self.table.get(i, s);
            node.chain = outcome;
            self.table.set(i, s, node);
        }
        outcome
    }

    /// The forward heuristic (see the module documentation), in internal units.
    #[inline]
    fn h(&self, i: u32, s: StateId, chain: u8) -> u64 {
        let missing = self.dfa.byte_distance(s).saturating_sub(self.len - i);
        let h_ins = hi(Weights::cost_bound(self.w.min_insert()) as u64 * missing as u64);
        let h_chain = if chain == CHAIN_FAIL { self.min_edit } else { 0 };
        let h = h_ins.max(h_chain);
        match &self.back {
            None => h,
            Some(b) => {
                let node = b.table.get(i, s);
                h.max(if node.closed { node.g } else { b.radius })
            }
        }
    }

    /// Records a path of internal cost `g` to `(i, s)` if it is the best so far, and opens the
    /// node.
    #[inline]
    fn relax(&mut self, i: u32, s: StateId, g: u64, parent: StateId, op: u8, byte: u8) {
        let mut node = self.table.get(i, s);
        if node.closed || g >= node.g || g >= self.bound {
            return;
        }
        if node.chain == CHAIN_UNKNOWN {
            node.chain = self.chain(i, s);
        }
        node.g = g;
        node.parent = parent;
        node.op = op;
        node.byte = byte;
        self.table.set(i, s, node);
        if node.chain == CHAIN_OK {
            // Keeping the rest is a full solution; when it is free, no edit can beat it.
            let rest = self.keep_rest[i as usize];
            self.offer(g.saturating_add(rest), i, s, Completion::Greedy);
            if rest == 0 {
                return;
            }
        }
        if let Some(b) = &self.back {
            let bn = b.table.get(i, s);
            if bn.closed {
                // The backward search knows the exact rest: a full solution, no need to expand.
                let total = g.saturating_add(bn.g);
                self.offer(total, i, s, Completion::Backward);
                return;
            }
        }
        let f = g.saturating_add(self.h(i, s, node.chain));
        if f < self.bound {
            self.heap.push(key(f, i, s));
        }
    }

    /// Drops stale heap entries and re-files entries whose `f` grew (the heuristic grows when
    /// the backward phase has run); returns the top live node as `(f, i, s, node)`.
    pub(super) fn peek_live(&mut self) -> Option<(u64, u32, StateId, Node)> {
        while let Some(&top) = self.heap.peek() {
            let (fk, i, s) = unkey(top);
            let node = self.table.get(i, s);
            if node.closed || node.g == INF {
                self.heap.pop();
                continue;
            }
            if let Some(b) = &self.back {
                let bn = b.table.get(i, s);
                if bn.closed {
                    // The backward search has since found this node's exact rest.
                    self.heap.pop();
                    let total = node.g.saturating_add(bn.g);
                    self.offer(total, i, s, Completion::Backward);
                    continue;
                }
            }
            let f = node.g.saturating_add(self.h(i, s, node.chain));
            if f > fk {
                self.heap.pop();
                if f < self.bound {
                    self.heap.push(key(f, i, s));
                }
                continue;
            }
            return Some((f, i, s, node));
        }
        None
    }

    fn start_forward(&mut self) {
        let start = self.dfa.start();
        let chain = self.chain(0, start);
        self.table.set(0, start, Node { g: 0, chain, ..UNSEEN });
        // The greedy completion of the start node is the first incumbent.
        let mut scratch = Vec::new();
        let c0 = greedy_tail(self.dfa, self.text, &mut self.groups, &self.w, &self.keep, 0, start, &mut scratch);
        self.offer(c0, 0, start, Completion::Greedy);
        let f0 = self.h(0, start, chain);
        if f0 < self.bound {
            self.heap.push(key(f0, 0, start));
        }
    }

    /// Forward A*, until done, out of budget, or `limit` forward expansions in all.
    fn forward(&mut self, limit: Option<usize>) -> Stop {
        while let Some((f, i, s, mut node)) = self.peek_live() {
            if f >= self.bound {
                return Stop::Exhausted;
            }
            if self.budget_exhausted() {
                return Stop::Budget(self.lower_bound(f));
            }
            if limit.is_some_and(|l| self.fwd_expansions >= l) {
                return Stop::Phase;
            }
            self.heap.pop();
            let g = node.g;
            node.closed = true;
            self.table.set(i, s, node);
            self.fwd_expansions += 1;
            if i > self.deepest.0 || (i == self.deepest.0 && g < self.deepest.1) {
                self.deepest = (i, g, s);
            }
            if i == self.len && self.dfa.is_accepting(s) {
                // Not reached in practice (goals are caught as chain successes), but harmless.
                self.offer(g, i, s, Completion::Greedy);
                continue;
            }
            let w = self.w;
            let range = self.groups.range(self.dfa, s);
            let class = self.groups.class(self.dfa, s);
            let (kept, b) = if i < self.len {
                let b = self.text[i as usize];
                let t = self.dfa.next(s, b);
                if !t.is_dead() {
                    self.relax(i + 1, t, g.saturating_add(self.keep[i as usize]), s, OP_KEEP, b);
                }
                self.relax(i + 1, s, g.saturating_add(w.delete(class, b, i as usize)), s, OP_DELETE, 0);
                // Keeping is never dearer than a plain substitution (`Weights::new` caps the
                // price of keeping), so none into the kept byte's target is needed; a cheap
                // special one may be, below.
                for k in range.clone() {
                    let (n, rep) = self.groups.pool[k];
                    if n != t {
                        self.relax(i + 1, n, g.saturating_add(w.substitute(class, b, rep)), s, OP_SUBSTITUTE, rep);
                    }
                }
                // The cheap replacement of this byte, when it differs from the representative.
                if let Some(sb) = special_target(b) {
                    let n = self.dfa.next(s, sb);
                    if !n.is_dead() && (n != t || self.keep[i as usize] > 0) {
                        self.relax(i + 1, n, g.saturating_add(w.substitute(class, b, sb)), s, OP_SUBSTITUTE, sb);
                    }
                }
                (t, b)
            } else {
                (StateId::DEAD, 0)
            };
            for k in range {
                let (n, rep) = self.groups.pool[k];
                if n != s {
                    let byte = if n == kept && insert_class(b) == insert_class(rep) { b } else { rep };
                    self.relax(i, n, g.saturating_add(w.insert(class, byte)), s, OP_INSERT, byte);
                }
            }
        }
        Stop::Exhausted
    }

    /// A proven lower bound on the optimum, given the forward search's smallest open `f`.
    pub(super) fn lower_bound(&self, f: u64) -> u64 {
        match &self.back {
            Some(b) => f.max(b.radius.min(self.best)),
            None => f,
        }
    }

    /// Forward A* first (most repairs are local and cheap to prove); when it takes long,
    /// alternate with the backward phase, doubling both allowances each round, so the
    /// heuristic keeps improving and neither direction wastes more than a constant factor.
    fn search(&mut self, tuning: Tuning) -> Stop {
        self.start_forward();
        let (mut forward_limit, mut backward_limit) = (tuning.forward_first, tuning.backward_first);
        loop {
            match self.forward(Some(forward_limit)) {
                Stop::Phase => {}
                other => return other,
            }
            if self.back.is_none() {
                self.start_backward();
            }
            match self.backward(backward_limit) {
                Stop::Phase => {}
                other => return other,
            }
            forward_limit = forward_limit.saturating_mul(2).max(1);
            backward_limit = backward_limit.saturating_mul(2).max(1);
        }
    }

    /// Runs the search to its end and builds the answer from the incumbent.
    pub(super) fn run(mut self, tuning: Tuning) -> RepairResult {
        match self.search(tuning) {
            Stop::Exhausted | Stop::Phase => {
                if self.best < self.cost_cap {
                    let edits = self.incumbent_edits();
                    let n = self.expansions();
                    finish(
                        self.dfa,
                        self.text,
                        &mut self.groups,
                        &self.w,
                        &self.keep,
                        RepairStatus::Optimal,
                        0,
                        edits,
                        n,
                    )
                } else {
                    let lower_bound = Weights::cost_bound(self.cost_cap);
                    self.no_text(RepairStatus::NoRepairWithinMaxCost, lower_bound)
                }
            }
            Stop::Budget(lb) => {
                self.improve_incumbent();
                let lower_bound = Weights::cost_bound(lb.min(self.best));
                if self.best < self.cost_cap {
                    let edits = self.incumbent_edits();
                    let n = self.expansions();
                    let status = RepairStatus::Anytime;
                    finish(self.dfa, self.text, &mut self.groups, &self.w, &self.keep, status, lower_bound, edits, n)
                } else {
                    self.no_text(RepairStatus::NotFound, lower_bound)
                }
            }
        }
    }

    fn no_text(&self, status: RepairStatus, lower_bound: u32) -> RepairResult {
        RepairResult { status, text: None, cost: None, lower_bound, edits: Vec::new(), expansions: self.expansions() }
    }
}

#[cfg(test)]
mod tests;
