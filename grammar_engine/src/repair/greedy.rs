//! Greedy completion: a valid repair from any node, without search.
//!
//! Keep what can be kept; at a byte that cannot be kept, take the cheapest local fix with a
//! short look-ahead; at the end, take a shortest way to acceptance. Not optimal, but always a
//! full match, and cheap. It serves twice: the greedy completion of the start node is the
//! search's first incumbent (so a valid answer exists from the start and pruning has a bound),
//! and when the budget runs out the most promising open nodes are completed greedily to give
//! the anytime answer.

use super::cost::{Weights, INF};
use super::groups::Groups;
use super::search::{Completion, Search};
use super::table::Table;
use super::{Edit, EditKind};
use crate::automata::Dfa;
use crate::util::StateId;

/// How many bytes the greedy completion looks ahead when choosing a local fix.
const LOOKAHEAD: usize = 24;
/// How many open nodes are completed greedily when the budget runs out.
const ANYTIME_CANDIDATES: usize = 32;

/// How many text bytes from `i` can be kept from `state` (capped at [`LOOKAHEAD`]); reaching
/// the end counts as the cap, plus one when the end is accepting.
fn keep_run(dfa: &Dfa, text: &[u8], mut i: usize, mut state: StateId) -> usize {
    let mut n = 0;
    while n < LOOKAHEAD {
        if i == text.len() {
            return LOOKAHEAD + dfa.is_accepting(state) as usize;
        }
        state = dfa.next(state, text[i]);
        if state.is_dead() {
            return n;
        }
        i += 1;
        n += 1;
    }
    n
}

/// Completes `(i, state)` into a full match without search: keep every byte that can be kept;
/// at a byte that cannot, take the local fix (deletion, substitution, or an insertion that lets
/// the byte be kept) after which the most text can be kept, cheaper first on ties; finally
/// append a shortest path to acceptance. Pushes the edits and returns their internal cost.
#[allow(clippy::too_many_arguments)]
pub(super) fn greedy_tail(
    dfa: &Dfa,
    text: &[u8],
    groups: &mut Groups,
    w: &Weights,
    keep: &[u64],
    mut i: usize,
    mut state: StateId,
    edits: &mut Vec<Edit>,
) -> u64 {
    let mut cost = 0u64;
    while i < text.len() {
        let b = text[i];
        let t = dfa.next(state, b);
        if !t.is_dead() {
            cost = cost.saturating_add(keep[i]);
            state = t;
            i += 1;
            continue;
        }
        let class = groups.class(dfa, state);
        // (progress, cost, edit, byte, next position, next state): most progress, then cheapest.
        let mut best = (keep_run(dfa, text, i + 1, state), w.delete(class, b, i), EditKind::Delete, 0u8, i + 1, state);
        for k in groups.range(dfa, state) {
            let (n, rep) = groups.pool[k];
            let p = keep_run(dfa, text, i + 1, n);
            let c = w.substitute(class, b, rep);
            if p > best.0 || (p == best.0 && c < best.1) {
                best = (p, c, EditKind::Substitute, rep, i + 1, n);
            }
            let t2 = dfa.next(n, b);
            if !t2.is_dead() {
                let p = 1 + keep_run(dfa, text, i + 1, t2);
                let c = w.insert(class, rep).saturating_add(keep[i]);
                if p > best.0 || (p == best.0 && c < best.1) {
                    // Insert, then keep `b`.
                    best = (p, c, EditKind::Insert, rep, i + 1, t2);
                }
            }
        }
        let (_, c, kind, byte, next_i, next_state) = best;
        cost = cost.saturating_add(c);
        edits.push(match kind {
            EditKind::Delete => Edit { kind, offset: i, old: Some(b), new: None },
            EditKind::Substitute => Edit { kind, offset: i, old: Some(b), new: Some(byte) },
            EditKind::Insert => Edit { kind, offset: i, old: None, new: Some(byte) },
        });
        i = next_i;
        state = next_state;
    }
    while !dfa.is_accepting(state) {
        let want = dfa.byte_distance(state) - 1;
        let class = groups.class(dfa, state);
        let r = groups.range(dfa, state);
        let &(n, rep) = groups.pool[r]
            .iter()
            .filter(|&&(n, _)| dfa.byte_distance(n) == want)
            .min_by_key(|&&(_, rep)| w.insert(class, rep))
            .expect("a live non-accepting state has a transition one step closer to acceptance");
        edits.push(Edit { kind: EditKind::Insert, offset: text.len(), old: None, new: Some(rep) });
        cost = cost.saturating_add(w.insert(class, rep));
        state = n;
    }
    cost
}

impl<T: Table> Search<'_, T> {
    /// Completes a few promising nodes greedily, keeping the best as the incumbent.
    pub(super) fn improve_incumbent(&mut self) {
        let mut candidates = vec![(self.deepest.0, self.deepest.2)];
        while candidates.len() <= ANYTIME_CANDIDATES {
            let Some((_, i, s, _)) = self.peek_live() else {
                break;
            };
            self.heap.pop();
            candidates.push((i, s));
        }
        let mut scratch = Vec::new();
        for (i, s) in candidates {
            let g = self.table.get(i, s).g;
            if g == INF {
                continue;
            }
            scratch.clear();
            let c =
                greedy_tail(self.dfa, self.text, &mut self.groups, &self.w, &self.keep, i as usize, s, &mut scratch);
            self.offer(g.saturating_add(c), i, s, Completion::Greedy);
        }
    }
}
