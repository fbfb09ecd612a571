//! How far a pushdown reading is from a full match: the fewest bytes to the end of each rule
//! from each of its states, and from there the fewest bytes to the end of the text.
//!
//! `bytes_to_end[r][s]`: the fewest bytes that take rule `r` from state `s` to its end, a call
//! costing the shortest string of the rule called. The shortest strings of rules depend on each
//! other, so this is a least fixpoint (each round, one backward shortest-path search per rule
//! with the calls priced at the previous round's lengths; a round changes nothing once no
//! length can fall further).
//!
//! A head's distance to the end of the text is its own plus, for each frame of its stack, the
//! distance from the state the call returns to; a set of heads takes its nearest. When every
//! byte a grammar reads is a token of its own (all byte-level and byte-fallback vocabularies),
//! the distance in bytes bounds the tokens a completion needs, and one more byte of progress
//! is always one token away: budget-aware masking built on it never strands a reading.
//!
//! Heads that keep a memo (see `super::distinct`) are measured with it: an element's shortest
//! completion may repeat a value its array holds, and an array that must read one more element
//! needs one whose value is new.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::distinct::{self, Memo, Memory};
use super::incoming::{Edge, Incoming};
use super::rules::Rtn;
use super::step::{Arena, Head, StackId};
use crate::util::StateId;

/// No way to the end (a state that is not live, or a rule with no finite string).
pub const FAR: u32 = u32::MAX / 4;

/// Fewest bytes to the end of each rule from each of its states (indexing a [`Bounds`] is
/// indexing these), and for rules that keep a set of distinct elements, the fewest without
/// reading another element.
#[derive(Debug)]
pub struct Bounds {
    to_end: Vec<Vec<u32>>,
    without_calls: Vec<Vec<u32>>,
}

impl std::ops::Deref for Bounds {
    type Target = [Vec<u32>];

    fn deref(&self) -> &[Vec<u32>] {
        &self.to_end
    }
}

impl Bounds {
    pub fn new(rtn: &Rtn) -> Bounds {
        let (to_end, reverse) = bytes_to_end(rtn);
        let none = vec![FAR; rtn.rules.len()];
        let without_calls = rtn
            .rules
            .iter()
            .zip(&reverse)
            .map(|(rule, rev)| match rule.memory {
                // Calls priced at FAR: paths through them never count.
                Memory::Distinct => shortest_to_accept(rule.dfa.num_states(), |s| rule.is_accepting(StateId::from_index(s)), rev, &none),
                _ => Vec::new(),
            })
            .collect();
        Bounds { to_end, without_calls }
    }
}

/// `bytes_to_end[rule][state]` for every rule of `rtn`, and the reverse edges of each rule.
fn bytes_to_end(rtn: &Rtn) -> (Vec<Vec<u32>>, Vec<Incoming>) {
    let n = rtn.rules.len();
    let mut shortest = vec![FAR; n];
    let mut out: Vec<Vec<u32>> = rtn.rules.iter().map(|r| vec![FAR; r.dfa.num_states()]).collect();
    let reverse: Vec<Incoming> = rtn.rules.iter().map(Incoming::new).collect();
    loop {
        let mut changed = false;
        // The start rule last: the build numbers the others callees first where no recursion
        // orders them, so one round prices most calls at their final lengths.
        for r in (1..n).chain(0..1) {
            let rule = &rtn.rules[r];
            crate::util::background::pause_point();
            let dist = shortest_to_accept(rule.dfa.num_states(), |s| rule.is_accepting(StateId::from_index(s)), &reverse[r], &shortest);
            let start = dist[rule.start().as_usize()];
            if dist != out[r] {
                out[r] = dist;
                changed = true;
            }
            if start < shortest[r] {
                shortest[r] = start;
                changed = true;
            }
        }
        if !changed {
            return (out, reverse);
        }
    }
}

/// Dijkstra backwards from the accepting states.
fn shortest_to_accept(n: usize, accepting: impl Fn(usize) -> bool, reverse: &Incoming, shortest: &[u32]) -> Vec<u32> {
    let mut dist = vec![FAR; n];
    let mut heap = BinaryHeap::new();
    for s in 0..n {
        if accepting(s) {
            dist[s] = 0;
            heap.push(Reverse((0u32, s as u32)));
        }
    }
    while let Some(Reverse((d, t))) = heap.pop() {
        if d > dist[t as usize] {
            continue;
        }
        for &(s, edge) in reverse.to(t as usize) {
            let w = match edge {
                Edge::Byte => 1,
                Edge::Call(c) => shortest[c as usize],
            };
            let nd = d.saturating_add(w).min(FAR);
            if nd < dist[s as usize] {
                dist[s as usize] = nd;
                heap.push(Reverse((nd, s)));
            }
        }
    }
    dist
}

/// The bytes from a stack's return states to the end of the text: each frame's return state's
/// distance, summed down to the bottom.
pub fn stack_distance(bounds: &[Vec<u32>], stacks: &dyn Arena, mut stack: StackId) -> u32 {
    let mut total = 0u32;
    while let Some(f) = stacks.top(stack) {
        total = total.saturating_add(bounds[f.rule.as_usize()][f.ret.as_usize()]).min(FAR);
        stack = f.parent;
    }
    total
}

/// The nearest head's distance to the end of the text.
pub fn heads_distance(rtn: &Rtn, bounds: &Bounds, stacks: &dyn Arena, heads: &[Head]) -> u32 {
    heads.iter().map(|&h| head_distance(rtn, bounds, stacks, h)).min().unwrap_or(FAR)
}

/// One head's distance to the end of the text.
pub fn head_distance(rtn: &Rtn, bounds: &Bounds, stacks: &dyn Arena, h: Head) -> u32 {
    let (r, s) = (h.rule.as_usize(), h.state.as_usize());
    let rule = rtn.rule(h.rule);
    let fixed = || bounds[r][s].saturating_add(stack_distance(bounds, stacks, h.stack)).min(FAR);
    if h.memo == Memo::NONE {
        return fixed();
    }
    match rule.memory {
        Memory::None => fixed(),
        // The element's shortest new completion, then its array from where the element returns
        // (which may end there: such an array asks for at most one element).
        Memory::Element => {
            let Some(f) = stacks.top(h.stack) else { return fixed() };
            let taken = distinct::keys(stacks, f.memo);
            let text = distinct::text(stacks, h.memo);
            let own = distinct::fresh_distance(rule, &bounds[r], h.state, &text, &taken, FAR);
            own.saturating_add(bounds[f.rule.as_usize()][f.ret.as_usize()]).saturating_add(stack_distance(bounds, stacks, f.parent)).min(FAR)
        }
        // Ending without another element, or through one whose value is new.
        Memory::Distinct => {
            let taken = distinct::keys(stacks, h.memo);
            let Some(&(element, _)) = rule.calls.iter().flat_map(|c| c.iter()).next() else { return fixed() };
            let e = rtn.rule(element);
            let shortest = bounds[element.as_usize()][e.start().as_usize()];
            let fresh = distinct::fresh_distance(e, &bounds[element.as_usize()], e.start(), b"", &taken, FAR);
            let through = bounds[r][s].saturating_add(fresh.saturating_sub(shortest));
            let own = if fresh >= FAR { bounds.without_calls[r][s] } else { through.min(bounds.without_calls[r][s]) };
            own.saturating_add(stack_distance(bounds, stacks, h.stack)).min(FAR)
        }
    }
}
