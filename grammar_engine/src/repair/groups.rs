//! Grouped transitions: each DFA state's live transitions, one per distinct target state.
//!
//! For the cost of a repair only the state a byte leads to matters, not the byte itself, so
//! the search tries one representative byte per target instead of up to 256 bytes. The
//! representative is chosen for readability: lowercase letters, then digits and capitals,
//! then other printable ASCII, whitespace, other ASCII, and non-ASCII last. A substitution
//! into the group that contains `text[i]` is skipped (keeping is free and reaches the same
//! node); an insertion into that group writes `text[i]` itself. Groups are built lazily, once
//! per state and call.

use crate::dfa::Dfa;

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

/// Per state, its live transitions collapsed to one representative byte per target state,
/// best-ranked bytes first. Filled lazily.
pub(super) struct Groups {
    off: Vec<u32>,
    len: Vec<u16>,
    /// `(target state, representative byte)` entries; a state's groups are a range of it.
    pub(super) pool: Vec<(u32, u8)>,
    /// Scratch: target state -> its index in the pool while a state's groups are built.
    slot: Vec<u32>,
}

impl Groups {
    pub(super) fn new(num_states: usize) -> Self {
        Groups {
            off: vec![u32::MAX; num_states],
            len: vec![0; num_states],
            pool: Vec::new(),
            slot: vec![u32::MAX; num_states],
        }
    }

    /// The pool range holding `state`'s groups.
    #[inline]
    pub(super) fn range(&mut self, dfa: &Dfa, state: u32) -> std::ops::Range<usize> {
        let s = state as usize;
        if self.off[s] == u32::MAX {
            let start = self.pool.len();
            let (pool, slot) = (&mut self.pool, &mut self.slot);
            dfa.for_each_transition(state, |b, next| {
                let k = slot[next as usize];
                if k == u32::MAX {
                    slot[next as usize] = pool.len() as u32;
                    pool.push((next, b));
                } else {
                    let entry = &mut pool[k as usize];
                    if (byte_rank(b), b) < (byte_rank(entry.1), entry.1) {
                        entry.1 = b;
                    }
                }
            });
            for &(n, _) in &self.pool[start..] {
                self.slot[n as usize] = u32::MAX;
            }
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
    use crate::dfa::DfaConfig;

    #[test]
    fn one_readable_byte_per_target() {
        let d = Dfa::from_regex("[0-9A-Za-z!]x|\ny", &DfaConfig::default()).unwrap();
        let mut groups = Groups::new(d.num_states());
        let range = groups.range(&d, d.start());
        let entries = groups.pool[range.clone()].to_vec();
        // 64 live bytes, two target states: a lowercase letter first, the newline last.
        assert_eq!(entries.iter().map(|&(_, b)| b).collect::<Vec<_>>(), vec![b'a', b'\n']);
        for &(target, byte) in &entries {
            assert_eq!(d.next(d.start(), byte), target);
        }
        assert_eq!(d.next(d.start(), b'Z'), entries[0].0);
        assert_ne!(entries[0].0, entries[1].0);
        // Built once: asking again gives the same range without growing the pool.
        let len = groups.pool.len();
        assert_eq!(groups.range(&d, d.start()), range);
        assert_eq!(groups.pool.len(), len);
    }
}
