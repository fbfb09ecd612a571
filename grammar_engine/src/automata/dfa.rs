//! The DFA table and its step API.
//!
//! A [`Dfa`] is a compact byte DFA whose every state can still reach acceptance: state ids
//! are dense [`StateId`]s, state 0 is the start, [`StateId::DEAD`] stands for "no valid
//! continuation", and a state
//! is *accepting* when the bytes read so far fully match. Transitions are stored per byte
//! class, one row per state. Owning the table lets the token index, jump-forward and repair
//! read transitions directly.
//!
//! How a table is made lives beside this file: [`super::build`] (from a regex),
//! [`super::prune`] (live states and byte distances), [`super::minimize`], [`super::cut`]
//! (removing bytes).

use crate::util::StateId;

/// A DFA over bytes with only live states. State 0 is the start state.
#[derive(Debug, Clone)]
pub struct Dfa {
    pub(super) classes: [u8; 256],
    /// Number of byte classes: the row length of `trans`.
    pub(super) stride: usize,
    pub(super) trans: Vec<StateId>,
    pub(super) accepting: Vec<bool>,
    /// Fewest bytes from each state to an accepting state.
    pub(super) byte_distance: Vec<u32>,
    /// One byte of each class, and the class sizes, for enumerating transitions.
    pub(super) class_rep: Vec<u8>,
    pub(super) class_size: Vec<u16>,
}

impl Dfa {
    /// The byte class of `byte`: transitions are stored per class.
    #[inline]
    pub(crate) fn class(&self, byte: u8) -> usize {
        self.classes[byte as usize] as usize
    }

    /// The targets of `state`, one per byte class ([`StateId::DEAD`] for none).
    #[inline]
    pub(crate) fn row(&self, state: StateId) -> &[StateId] {
        &self.trans[state.as_usize() * self.stride..(state.as_usize() + 1) * self.stride]
    }

    /// True when some live transition reads byte `b`.
    pub fn uses_byte(&self, b: u8) -> bool {
        let c = self.classes[b as usize] as usize;
        (0..self.num_states()).any(|s| !self.trans[s * self.stride + c].is_dead())
    }

    /// True when some live transition reads one of `bytes`: a pass over their classes only.
    pub(crate) fn reads_any_of(&self, bytes: &[u8]) -> bool {
        let mut classes: Vec<usize> = bytes.iter().map(|&b| self.class(b)).collect();
        classes.sort_unstable();
        classes.dedup();
        self.trans.chunks_exact(self.stride).any(|row| classes.iter().any(|&c| !row[c].is_dead()))
    }

    /// Which bytes some live transition reads: one pass over the table, by class.
    pub fn used_bytes(&self) -> [bool; 256] {
        let mut live = vec![false; self.stride];
        for (i, t) in self.trans.iter().enumerate() {
            if !t.is_dead() {
                live[i % self.stride] = true;
            }
        }
        std::array::from_fn(|b| live[self.classes[b] as usize])
    }

    pub const fn start(&self) -> StateId {
        StateId::new(0)
    }

    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    /// The state after reading `byte` in `state`, or [`StateId::DEAD`].
    #[inline(always)]
    pub fn next(&self, state: StateId, byte: u8) -> StateId {
        self.trans[state.as_usize() * self.stride + self.classes[byte as usize] as usize]
    }

    /// Walks `bytes` from `state`; [`StateId::DEAD`] as soon as one byte leaves the language.
    #[inline]
    pub fn walk(&self, mut state: StateId, bytes: &[u8]) -> StateId {
        for &b in bytes {
            state = self.next(state, b);
            if state.is_dead() {
                return StateId::DEAD;
            }
        }
        state
    }

    /// True when the whole of `bytes`, read from the start, is a full match.
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let s = self.walk(self.start(), bytes);
        !s.is_dead() && self.is_accepting(s)
    }

    /// True when the bytes that led to `state` fully match.
    #[inline]
    pub fn is_accepting(&self, state: StateId) -> bool {
        self.accepting[state.as_usize()]
    }

    /// Fewest bytes from `state` to a full match.
    pub fn byte_distance(&self, state: StateId) -> u32 {
        self.byte_distance[state.as_usize()]
    }

    /// Calls `f(byte, next)` for every byte with a live transition out of `state`.
    pub fn for_each_transition(&self, state: StateId, mut f: impl FnMut(u8, StateId)) {
        let row = self.row(state);
        for b in 0..=255u8 {
            let t = row[self.classes[b as usize] as usize];
            if !t.is_dead() {
                f(b, t);
            }
        }
    }

    /// The longest byte string every full match continuing from `state` begins with: follow
    /// the state's only live byte while there is exactly one and the state is not accepting.
    pub fn forced_bytes(&self, mut state: StateId) -> Vec<u8> {
        let mut out = Vec::new();
        // A forced chain cannot revisit a state (it would never accept), so it is shorter
        // than the number of states.
        while out.len() <= self.num_states() && !self.is_accepting(state) {
            let row = self.row(state);
            let mut only: Option<(u8, StateId)> = None;
            let mut count = 0usize;
            for (c, &t) in row.iter().enumerate() {
                if !t.is_dead() {
                    count += self.class_size[c] as usize;
                    only = Some((self.class_rep[c], t));
                }
            }
            match only {
                Some((b, t)) if count == 1 => {
                    out.push(b);
                    state = t;
                }
                _ => break,
            }
        }
        out
    }

    /// Every string of a finite language, in depth-first byte order, or `None` when the
    /// language is infinite or has more than `max` strings. Each state is live (it reaches a
    /// match), so a cycle on the current path means infinitely many strings.
    pub(crate) fn strings(&self, max: usize) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut on_path = vec![false; self.num_states()];
        self.list_from(self.start(), &mut Vec::new(), &mut on_path, max, &mut out).then_some(out)
    }

    fn list_from(&self, s: StateId, path: &mut Vec<u8>, on_path: &mut [bool], max: usize, out: &mut Vec<Vec<u8>>) -> bool {
        if on_path[s.as_usize()] || path.len() > 4096 {
            return false;
        }
        if self.is_accepting(s) {
            if out.len() == max {
                return false;
            }
            out.push(path.clone());
        }
        on_path[s.as_usize()] = true;
        let mut edges = Vec::new();
        self.for_each_transition(s, |b, t| edges.push((b, t)));
        let ok = edges.into_iter().all(|(b, t)| {
            path.push(b);
            let ok = self.list_from(t, path, on_path, max, out);
            path.pop();
            ok
        });
        on_path[s.as_usize()] = false;
        ok
    }

    pub fn memory_bytes(&self) -> usize {
        256 + self.trans.len() * 4 + self.accepting.len() + self.byte_distance.len() * 4 + self.class_rep.len() * 3
    }
}

/// One byte of each class, and the number of bytes in each class.
pub(super) fn class_tables(classes: &[u8; 256], stride: usize) -> (Vec<u8>, Vec<u16>) {
    let mut rep = vec![0u8; stride];
    let mut size = vec![0u16; stride];
    for b in (0..=255u8).rev() {
        rep[classes[b as usize] as usize] = b;
        size[classes[b as usize] as usize] += 1;
    }
    (rep, size)
}
