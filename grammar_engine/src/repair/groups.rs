//! Grouped transitions: each DFA state's live transitions, one per distinct target state and
//! insertion price class; and each state's class for the cost model.
//!
//! For the cost of a repair only the state a byte leads to and the byte's price class matter,
//! not the byte itself, so the search tries one representative byte per (target, class)
//! instead of up to 256 bytes. The representative is chosen for readability: lowercase
//! letters, then digits and capitals, then other printable ASCII, whitespace, other ASCII, and
//! non-ASCII last. A substitution into the group that contains `text[i]` is skipped (keeping
//! reaches the same node for less); an insertion into that group writes `text[i]` itself.
//! Groups and classes are built lazily, once per state and call.

use super::cost::{insert_class, is_space, StateClass, INSERT_CLASSES};
use crate::automata::Dfa;
use crate::util::StateId;

/// A state with at least this many live printable ASCII bytes is inside a free string.
const FREE_STRING_BYTES: usize = 80;

fn byte_rank(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => 0,
        b'0'..=b'9' | b'A'..=b'Z' => 1,
        b' '..=b'~' => 2,
        b'\t' | b'\n' | b'\r' => 3,
        0..=0x7f => 4,
        _ => 5,
    }
}

/// `Groups::off` of a state whose groups are not built yet.
const UNBUILT: u32 = u32::MAX;
/// `Groups::slot` of a (target, class) pair with no pool entry.
const NO_SLOT: u32 = u32::MAX;

/// Per state, its live transitions collapsed to one representative byte per target state,
/// best-ranked bytes first. Filled lazily.
pub(super) struct Groups {
    off: Vec<u32>,
    len: Vec<u16>,
    class: Vec<StateClass>,
    /// States reached from the start by whitespace only, sorted.
    before: Vec<StateId>,
    /// `(target state, representative byte)` entries; a state's groups are a range of it.
    pub(super) pool: Vec<(StateId, u8)>,
    /// Scratch: `INSERT_CLASSES * target + class` -> its index in the pool while a state's groups are built.
    slot: Vec<u32>,
}

impl Groups {
    pub(super) fn new(dfa: &Dfa) -> Self {
        let num_states = dfa.num_states();
        let mut before = vec![dfa.start()];
        let mut k = 0;
        while k < before.len() {
            let s = before[k];
            for b in [b' ', b'\t', b'\n', b'\r'] {
                let t = dfa.next(s, b);
                if !t.is_dead() && !before.contains(&t) {
                    before.push(t);
                }
            }
            k += 1;
        }
        before.sort_unstable();
        Groups {
            off: vec![UNBUILT; num_states],
            len: vec![0; num_states],
            class: vec![StateClass::Structure; num_states],
            before,
            pool: Vec::new(),
            slot: vec![NO_SLOT; INSERT_CLASSES * num_states],
        }
    }

    /// The cost model's class of `state` (see [`StateClass`]).
    #[inline]
    pub(super) fn class(&mut self, dfa: &Dfa, state: StateId) -> StateClass {
        if self.off[state.as_usize()] == UNBUILT {
            self.range(dfa, state);
        }
        self.class[state.as_usize()]
    }

    /// The pool range holding `state`'s groups.
    #[inline]
    pub(super) fn range(&mut self, dfa: &Dfa, state: StateId) -> std::ops::Range<usize> {
        let s = state.as_usize();
        if self.off[s] == UNBUILT {
            let start = self.pool.len();
            let (pool, slot) = (&mut self.pool, &mut self.slot);
            let (mut printable, mut only_space) = (0usize, true);
            dfa.for_each_transition(state, |b, next| {
                printable += (b' '..=b'~').contains(&b) as usize;
                only_space &= is_space(b);
                let key = INSERT_CLASSES * next.as_usize() + insert_class(b) as usize;
                let k = slot[key];
                if k == NO_SLOT {
                    slot[key] = pool.len() as u32;
                    pool.push((next, b));
                } else {
                    let entry = &mut pool[k as usize];
                    if (byte_rank(b), b) < (byte_rank(entry.1), entry.1) {
                        entry.1 = b;
                    }
                }
            });
            for &(n, b) in &self.pool[start..] {
                self.slot[INSERT_CLASSES * n.as_usize() + insert_class(b) as usize] = NO_SLOT;
            }
            self.class[s] = if self.before.binary_search(&state).is_ok() {
                StateClass::Before
            } else if dfa.is_accepting(state) && only_space {
                StateClass::After
            } else if printable >= FREE_STRING_BYTES {
                StateClass::String
            } else {
                StateClass::Structure
            };
            self.pool[start..].sort_by_key(|&(_, b)| (byte_rank(b), b));
            self.off[s] = start as u32;
            self.len[s] = (self.pool.len() - start) as u16;
        }
        let start = self.off[s] as usize;
        start..start + self.len[s] as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automata::DfaConfig;

    #[test]
    fn one_readable_byte_per_target() {
        let d = Dfa::from_regex("[0-9A-Za-z,]x|\ny", &DfaConfig::default()).unwrap();
        let mut groups = Groups::new(&d);
        let range = groups.range(&d, d.start());
        let entries = groups.pool[range.clone()].to_vec();
        // 64 live bytes, two target states, `,` in a price class of its own: a lowercase
        // letter first, the newline last.
        assert_eq!(entries.iter().map(|&(_, b)| b).collect::<Vec<_>>(), vec![b'a', b',', b'\n']);
        for &(target, byte) in &entries {
            assert_eq!(d.next(d.start(), byte), target);
        }
        assert_eq!(d.next(d.start(), b'Z'), entries[0].0);
        assert_eq!(entries[0].0, entries[1].0);
        assert_ne!(entries[0].0, entries[2].0);
        // Built once: asking again gives the same range without growing the pool.
        let len = groups.pool.len();
        assert_eq!(groups.range(&d, d.start()), range);
        assert_eq!(groups.pool.len(), len);
    }
}
