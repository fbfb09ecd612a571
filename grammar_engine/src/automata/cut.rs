//! Byte cuts: removing bytes from a [`Dfa`].
//!
//! [`Dfa::restrict_bytes`] drops the strings that need a byte outside a set (a grammar drops
//! the bytes no token of its vocabulary contains) and prunes what can no longer accept;
//! [`Dfa::with_bytes_cut`] cuts transitions but keeps every state and its id (a structure's
//! ordinary tokens walk such a copy, so they cannot read a special token's marker byte).
//! Both refine the byte classes first, so no class mixes kept and removed bytes.

use std::collections::HashMap;

use super::dfa::class_tables;
use super::Dfa;
use crate::util::StateId;

impl Dfa {
    /// The same language without the strings that use a byte outside `allowed`: transitions on
    /// those bytes are removed and states that can no longer reach acceptance are pruned.
    /// `None` when nothing is left. Used to drop bytes that no token of a vocabulary contains.
    pub fn restrict_bytes(&self, allowed: &[bool; 256]) -> Option<Dfa> {
        // Refine the byte classes so no class mixes allowed and removed bytes.
        let mut key_to_class: HashMap<(u8, bool), u8> = HashMap::new();
        let mut classes = [0u8; 256];
        for b in 0..256usize {
            let key = (self.classes[b], allowed[b]);
            let next_id = key_to_class.len() as u8;
            classes[b] = *key_to_class.entry(key).or_insert(next_id);
        }
        let stride = key_to_class.len();
        let mut class_old = vec![(0u8, false); stride];
        for (&key, &c) in &key_to_class {
            class_old[c as usize] = key;
        }
        let mut raw = Vec::with_capacity(self.num_states() * stride);
        for s in 0..self.num_states() {
            for &(old, ok) in &class_old {
                raw.push(if ok { self.trans[s * self.stride + old as usize] } else { StateId::DEAD });
            }
        }
        Dfa::prune(classes, stride, &raw, &self.accepting).map(Dfa::minimize)
    }

    /// The same table with every transition on `removed` bytes cut, and nothing else changed:
    /// the states keep their ids, acceptance and byte distances (those of this DFA's language),
    /// and no state is pruned. A structure's grammar walks ordinary tokens through this copy, so
    /// the bytes that stand for special tokens can only be read by those tokens.
    pub(crate) fn with_bytes_cut(&self, removed: &[u8]) -> Dfa {
        let mut key_to_class: HashMap<(u8, bool), u8> = HashMap::new();
        let mut classes = [0u8; 256];
        for (b, class) in classes.iter_mut().enumerate() {
            let key = (self.classes[b], removed.contains(&(b as u8)));
            let next_id = key_to_class.len() as u8;
            *class = *key_to_class.entry(key).or_insert(next_id);
        }
        let stride = key_to_class.len();
        let mut class_old = vec![(0u8, false); stride];
        for (&key, &c) in &key_to_class {
            class_old[c as usize] = key;
        }
        let mut trans = Vec::with_capacity(self.num_states() * stride);
        for s in 0..self.num_states() {
            for &(old, cut) in &class_old {
                trans.push(if cut { StateId::DEAD } else { self.trans[s * self.stride + old as usize] });
            }
        }
        let (class_rep, class_size) = class_tables(&classes, stride);
        Dfa {
            classes,
            stride,
            trans,
            accepting: self.accepting.clone(),
            byte_distance: self.byte_distance.clone(),
            class_rep,
            class_size,
        }
    }
}

impl Dfa {
    /// The same table restricted to the states `keep` marks (the start among them), renumbered
    /// in order; transitions into dropped states are cut. Returns the table and, per old state,
    /// its new id ([`StateId::DEAD`] for a dropped one). Acceptance and byte distances are
    /// kept as they were (distances through dropped states may then be too low: callers that
    /// drop states reached otherwise, as a pushdown rule drops the digits of its calls, keep
    /// their own distances).
    pub(crate) fn retain_states(&self, keep: &[bool]) -> (Dfa, Vec<StateId>) {
        let mut new_id = vec![StateId::DEAD; self.num_states()];
        let mut n = 0usize;
        for (s, &k) in keep.iter().enumerate() {
            if k {
                new_id[s] = StateId::from_index(n);
                n += 1;
            }
        }
        let mut trans = Vec::with_capacity(n * self.stride);
        let mut accepting = Vec::with_capacity(n);
        let mut byte_distance = Vec::with_capacity(n);
        for (s, &k) in keep.iter().enumerate() {
            if !k {
                continue;
            }
            for &t in &self.trans[s * self.stride..(s + 1) * self.stride] {
                trans.push(if t.is_dead() { StateId::DEAD } else { new_id[t.as_usize()] });
            }
            accepting.push(self.accepting[s]);
            byte_distance.push(self.byte_distance[s]);
        }
        let dfa = Dfa {
            classes: self.classes,
            stride: self.stride,
            trans,
            accepting,
            byte_distance,
            class_rep: self.class_rep.clone(),
            class_size: self.class_size.clone(),
        };
        (dfa, new_id)
    }
}
