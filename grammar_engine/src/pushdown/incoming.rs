//! A rule's transitions reversed: for each state, the states that lead to it in one step, by a
//! byte or by a call returning there.
//!
//! Liveness (which states reach acceptance) and byte distances (how far acceptance is) are
//! searches backwards from the accepting states. A DFA row holds one target per byte class,
//! and most rows send many classes to the same state (a string's characters), so a byte edge
//! is kept once per pair of states. The edges sit in one array in compressed rows, built in
//! one pass over the table, without an allocation per state.

use super::rules::Rule;
use crate::util::StateId;

/// How a state leads to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edge {
    /// Through one byte or more (the classes between the two states).
    Byte,
    /// Through a call of the rule with this number, returning to the state.
    Call(u32),
}

/// The reversed transitions of one rule (see the module docs).
#[derive(Debug)]
pub(crate) struct Incoming {
    /// `edges[start[t]..start[t + 1]]` lead to state `t`.
    start: Vec<u32>,
    edges: Vec<(u32, Edge)>,
}

impl Incoming {
    pub(crate) fn new(rule: &Rule) -> Incoming {
        let n = rule.dfa.num_states();
        // One pass over the table: each (target, state) pair once (`last[t]`: the latest
        // state seen leading to `t`), then the calls; then a counting sort by target.
        let mut last = vec![u32::MAX; n];
        let mut pairs: Vec<(u32, u32, Edge)> = Vec::new();
        for s in 0..n {
            let st = StateId::from_index(s);
            for &t in rule.dfa.row(st) {
                if !t.is_dead() && last[t.as_usize()] != s as u32 {
                    last[t.as_usize()] = s as u32;
                    pairs.push((t.as_u32(), s as u32, Edge::Byte));
                }
            }
            for &(c, ret) in rule.calls_at(st) {
                pairs.push((ret.as_u32(), s as u32, Edge::Call(c.as_u32())));
            }
        }
        let mut start = vec![0u32; n + 1];
        for &(t, _, _) in &pairs {
            start[t as usize + 1] += 1;
        }
        for t in 0..n {
            start[t + 1] += start[t];
        }
        let mut fill = start.clone();
        let mut edges = vec![(0u32, Edge::Byte); pairs.len()];
        for (t, s, e) in pairs {
            edges[fill[t as usize] as usize] = (s, e);
            fill[t as usize] += 1;
        }
        Incoming { start, edges }
    }

    /// The (state, edge) pairs that lead to state `t`.
    #[inline]
    pub(crate) fn to(&self, t: usize) -> &[(u32, Edge)] {
        &self.edges[self.start[t] as usize..self.start[t + 1] as usize]
    }
}
