//! From a raw transition table to a [`Dfa`] of live states only.
//!
//! Every construction (subset construction, lazy DFA walk, products, byte cuts) first makes
//! a raw table in which some states may never reach acceptance. Pruning keeps the states from
//! which an accepting state is reachable, renumbers them with the start first, and records
//! each one's byte distance to acceptance, which the token index, budgets and repair use.

use std::collections::VecDeque;

use super::dfa::class_tables;
use super::Dfa;
use crate::util::{background, StateId};

/// The byte distance of a state from which no accepting state has been reached (yet).
const UNREACHED: u32 = u32::MAX;

impl Dfa {
    /// A pruned, minimized DFA from a raw transition table (state 0 = start, rows of `stride`
    /// targets indexed by `classes`, [`StateId::DEAD`] for no transition); `None` when no string is
    /// accepted. Used by the automaton algebra, whose products come out in this form.
    pub(crate) fn from_table(classes: [u8; 256], stride: usize, trans: &[StateId], accepting: &[bool]) -> Option<Dfa> {
        Dfa::prune(classes, stride, trans, accepting).map(Dfa::minimize)
    }

    /// Keeps the states of a raw table (state 0 = start) from which an accepting state is
    /// reachable, renumbered in order with the start first, and computes byte distances to
    /// acceptance. `None` when the start state cannot reach acceptance.
    pub(crate) fn prune(classes: [u8; 256], stride: usize, raw_trans: &[StateId], accepting: &[bool]) -> Option<Dfa> {
        let n = accepting.len();
        // Predecessors in CSR form: `rev[rev_start[t]..rev_start[t + 1]]` lead to `t`, each
        // state once (a row sends most classes to a few targets; `last[t]` is the latest state
        // seen leading to `t`).
        let mut last = vec![u32::MAX; n];
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (s, row) in raw_trans[..n * stride].chunks_exact(stride).enumerate() {
            for &t in row {
                if !t.is_dead() && last[t.as_usize()] != s as u32 {
                    last[t.as_usize()] = s as u32;
                    pairs.push((t.as_u32(), s as u32));
                }
            }
        }
        let mut rev_start = vec![0u32; n + 1];
        for &(t, _) in &pairs {
            rev_start[t as usize + 1] += 1;
        }
        for i in 1..=n {
            rev_start[i] += rev_start[i - 1];
        }
        // A held compilation pauses between the passes over the table.
        background::pause_point();
        let mut fill = rev_start.clone();
        let mut rev = vec![0u32; pairs.len()];
        for (t, s) in pairs {
            rev[fill[t as usize] as usize] = s;
            fill[t as usize] += 1;
        }
        background::pause_point();
        let mut dist = vec![UNREACHED; n];
        let mut queue: VecDeque<u32> = VecDeque::new();
        for s in 0..n {
            if accepting[s] {
                dist[s] = 0;
                queue.push_back(s as u32);
            }
        }
        while let Some(t) = queue.pop_front() {
            for &s in &rev[rev_start[t as usize] as usize..rev_start[t as usize + 1] as usize] {
                if dist[s as usize] == UNREACHED {
                    dist[s as usize] = dist[t as usize] + 1;
                    queue.push_back(s);
                }
            }
        }
        if dist.first().copied().unwrap_or(UNREACHED) == UNREACHED {
            return None;
        }
        let mut new_id = vec![StateId::DEAD; n];
        let mut live = Vec::new();
        for s in 0..n {
            if dist[s] != UNREACHED {
                new_id[s] = StateId::from_index(live.len());
                live.push(s);
            }
        }
        background::pause_point();
        let mut trans = Vec::with_capacity(live.len() * stride);
        for &s in &live {
            for &t in &raw_trans[s * stride..(s + 1) * stride] {
                trans.push(if t.is_dead() { StateId::DEAD } else { new_id[t.as_usize()] });
            }
        }
        let (class_rep, class_size) = class_tables(&classes, stride);
        Some(Dfa {
            classes,
            stride,
            trans,
            accepting: live.iter().map(|&s| accepting[s]).collect(),
            byte_distance: live.iter().map(|&s| dist[s]).collect(),
            class_rep,
            class_size,
        })
    }
}
