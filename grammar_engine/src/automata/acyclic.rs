//! Minimizing a DFA without cycles by hashing, bottom-up (Revuz's algorithm, "Minimisation
//! of acyclic deterministic automata in linear time", 1992).
//!
//! Counted bounds (a string's `maxLength`, an array's `maxItems`, a format's fixed fields)
//! make tables without cycles, and among the largest a JSON Schema builds. In such a table
//! every state reads finitely many strings, and two states are equivalent exactly when they
//! agree on acceptance and, class by class, on the equivalence class of their successors (by
//! induction on the longest string they read). So one pass over the states in postorder (each
//! after its successors), hashing each row of successor classes, finds every class: each
//! transition is read a few times in row order, where partition refinement reads it
//! O(log n) times in scattered order. A table with a cycle is left to refinement; the depth
//! first search that finds the postorder stops at the first cycle it meets.

use rustc_hash::{FxHashMap, FxHasher};
use std::hash::Hasher;

use super::Dfa;
use crate::util::{background, StateId};

/// The class of a dead transition (a class of its own: in a pruned table every state reads
/// some string), of a state not yet classified, and the end of a chain of classes.
const NONE: u32 = u32::MAX;

/// Hashes keep only these bits (the best mixed) in tests, so that rows of different classes
/// share hashes and the comparison of rows is exercised.
const HASH_MASK: u64 = if cfg!(test) { 0xC000_0000_0000_0000 } else { u64::MAX };

impl Dfa {
    /// The minimal DFA of this pruned table when it has no cycle (classes numbered at their
    /// first member, in state order, so the start stays state 0); the table unchanged, as the
    /// error, when it has one.
    pub(super) fn minimize_acyclic(self) -> Result<Dfa, Dfa> {
        let Some(postorder) = self.postorder() else { return Err(self) };
        let n = self.num_states();
        let k = self.stride;
        let mut class = vec![NONE; n];
        // The first state of each class, and hash → the last class with that hash, linked
        // through `chain`.
        let mut firsts: Vec<u32> = Vec::new();
        let mut heads: FxHashMap<u64, u32> = FxHashMap::default();
        let mut chain: Vec<u32> = Vec::new();
        // Successors are classified before their predecessors (postorder).
        let of = |class: &[u32], t: StateId| {
            if t.is_dead() {
                return NONE;
            }
            debug_assert_ne!(class[t.as_usize()], NONE, "a successor classified first");
            class[t.as_usize()]
        };
        background::pause_point();
        for (i, &s) in postorder.iter().enumerate() {
            if i % 4096 == 4095 {
                background::pause_point();
            }
            let s = s as usize;
            let row = &self.trans[s * k..(s + 1) * k];
            let mut h = FxHasher::default();
            h.write_u8(self.accepting[s] as u8);
            for &t in row {
                h.write_u32(of(&class, t));
            }
            let hash = h.finish() & HASH_MASK;
            let mut c = heads.get(&hash).copied().unwrap_or(NONE);
            while c != NONE {
                let r = firsts[c as usize] as usize;
                let other = &self.trans[r * k..(r + 1) * k];
                if self.accepting[r] == self.accepting[s] && row.iter().zip(other).all(|(&a, &b)| of(&class, a) == of(&class, b)) {
                    break;
                }
                c = chain[c as usize];
            }
            if c == NONE {
                c = firsts.len() as u32;
                firsts.push(s as u32);
                chain.push(heads.insert(hash, c).unwrap_or(NONE));
            }
            class[s] = c;
        }
        if firsts.len() == n {
            return Ok(self);
        }
        background::pause_point();
        Ok(self.quotient(firsts.len(), |s| class[s] as usize))
    }

    /// Every state, each after all its successors (a depth first search from the start, which
    /// reaches every state of a pruned table); `None` at the first cycle.
    fn postorder(&self) -> Option<Vec<u32>> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let n = self.num_states();
        let k = self.stride;
        let mut color = vec![NEW; n];
        let mut order = Vec::with_capacity(n);
        // (state, next class to follow)
        let mut stack: Vec<(u32, u32)> = vec![(0, 0)];
        color[0] = OPEN;
        let mut steps = 0u32;
        while let Some(top) = stack.last_mut() {
            steps = steps.wrapping_add(1);
            if steps % 65536 == 0 {
                background::pause_point();
            }
            let (s, c) = (top.0 as usize, top.1 as usize);
            if c == k {
                color[s] = DONE;
                order.push(s as u32);
                stack.pop();
                continue;
            }
            top.1 += 1;
            let t = self.trans[s * k + c];
            if t.is_dead() {
                continue;
            }
            match color[t.as_usize()] {
                NEW => {
                    color[t.as_usize()] = OPEN;
                    stack.push((t.as_u32(), 0));
                }
                OPEN => return None,
                _ => {}
            }
        }
        (order.len() == n).then_some(order)
    }
}
