//! DFA minimization by partition refinement over transitions (Valmari and Lehtinen's
//! algorithm, "Fast brief practical DFA minimization", 2012).
//!
//! Fewer states means fewer rows of the token index to compute and hold: Unicode classes and
//! counted repeats leave many equivalent states behind. The refinement works on the partial
//! transition function (no dead sink: most of a JSON automaton's transitions are dead, and a
//! sink would be the largest splitter of all). Two refinable partitions are kept: of the
//! states into blocks, and of the live transitions into cords (first one cord per byte
//! class). A cord splits blocks by the tails of its transitions; a new block splits cords by
//! the transitions entering its states. A split set keeps its larger part under the old id
//! and the smaller part is queued (a set still waiting keeps both parts queued), so every
//! transition is read O(log n) times: O(n·k) to read the table, then O(m log n) for m live
//! transitions, with no term in the number of classes per split.

use super::Dfa;
use crate::util::{background, StateId};

/// Largest transition table (states × byte classes) [`Dfa::minimize`] works on.
pub(super) const MINIMIZE_MAX_ENTRIES: usize = 4_000_000;

impl Dfa {
    /// Merges equivalent states. Fewer states means fewer rows to index: Unicode classes and
    /// counted repeats leave many duplicates behind, and each free-text state costs a full walk
    /// of the token trie. Skipped for tables of more than `MINIMIZE_MAX_ENTRIES` transitions.
    /// States are numbered in order of their first member, so the start stays state 0.
    ///
    /// The table must be pruned ([`Dfa::prune`]): every state reaches acceptance, so a state
    /// with a transition on some class differs from one without, and splitting by the live
    /// transitions alone finds every difference. (A table with bytes cut,
    /// [`Dfa::with_bytes_cut`], may hold states that no longer reach acceptance: those would be
    /// kept, not dropped.)
    pub(crate) fn minimize(self) -> Dfa {
        if self.num_states() <= 1 || self.num_states().saturating_mul(self.stride) > MINIMIZE_MAX_ENTRIES {
            return self;
        }
        // A table without cycles (counted bounds) by hashing, in linear time.
        match self.minimize_acyclic() {
            Ok(minimal) => minimal,
            Err(table) => table.refine(),
        }
    }

    /// [`Dfa::minimize`] by partition refinement alone.
    pub(super) fn refine(self) -> Dfa {
        let n = self.num_states();
        let k = self.stride;
        if n <= 1 {
            return self;
        }
        // The live transitions, numbered by head (so the transitions entering a state have
        // consecutive ids) and laid out in the cords by class, each with its tail beside it.
        let mut class_start = vec![0u32; k + 1];
        let mut in_start = vec![0u32; n + 1];
        for s in 0..n {
            for (c, t) in self.row(StateId::from_index(s)).iter().enumerate() {
                if !t.is_dead() {
                    class_start[c + 1] += 1;
                    in_start[t.as_usize() + 1] += 1;
                }
            }
        }
        for c in 0..k {
            class_start[c + 1] += class_start[c];
        }
        for s in 0..n {
            in_start[s + 1] += in_start[s];
        }
        let m = class_start[k] as usize;
        background::pause_point();
        // The cord of each class (classes no transition reads have none).
        let mut cord_of = vec![0u32; k];
        let mut sets = Vec::new();
        for c in 0..k {
            cord_of[c] = sets.len() as u32;
            if class_start[c] < class_start[c + 1] {
                sets.push(Set { first: class_start[c], past: class_start[c + 1], marked: 0 });
            }
        }
        let mut class_fill = class_start;
        let mut in_fill = in_start.clone();
        let mut slots = vec![Slot { elem: 0, payload: 0 }; m];
        let mut place = vec![Place { at: 0, set: 0 }; m];
        for s in 0..n {
            for (c, t) in self.row(StateId::from_index(s)).iter().enumerate() {
                if !t.is_dead() {
                    let id = in_fill[t.as_usize()];
                    in_fill[t.as_usize()] += 1;
                    let at = class_fill[c];
                    class_fill[c] += 1;
                    slots[at as usize] = Slot { elem: id, payload: s as u32 };
                    place[id as usize] = Place { at, set: cord_of[c] };
                }
            }
        }
        let mut cords = Refinable { slots, place, sets, touched: Vec::new() };
        background::pause_point();

        let mut blocks = Refinable::new(n);
        for s in 0..n {
            if self.accepting[s] {
                blocks.mark(s as u32);
            }
        }
        blocks.split();

        // The first cords, one per class over all states, split as the whole state set would;
        // so of its first split (accepting or not) only the smaller part, block 1, need split
        // in turn, and block 0 never does.
        let (mut b, mut c) = (1, 0);
        let mut rounds = 0u32;
        while c < cords.len() {
            rounds = rounds.wrapping_add(1);
            if rounds % 256 == 0 {
                background::pause_point();
            }
            for slot in cords.members(c) {
                blocks.mark(slot.payload);
            }
            blocks.split();
            c += 1;
            while b < blocks.len() {
                for slot in blocks.members(b) {
                    let s = slot.elem as usize;
                    for t in in_start[s]..in_start[s + 1] {
                        cords.mark(t);
                    }
                }
                cords.split();
                b += 1;
            }
        }
        if blocks.len() == n {
            return self;
        }
        background::pause_point();
        let count = blocks.len();
        self.quotient(count, |s| blocks.set_of(s as u32))
    }

    /// The table of `count` classes of equivalent states (`class_of` each state's), numbered
    /// in order of their first state, so the start stays state 0.
    pub(super) fn quotient(self, count: usize, class_of: impl Fn(usize) -> usize) -> Dfa {
        let mut renum = vec![StateId::DEAD; count];
        let mut reps = Vec::with_capacity(count);
        for s in 0..self.num_states() {
            let c = class_of(s);
            if renum[c].is_dead() {
                renum[c] = StateId::from_index(reps.len());
                reps.push(s);
            }
        }
        let mut trans = Vec::with_capacity(reps.len() * self.stride);
        for &s in &reps {
            for &t in self.row(StateId::from_index(s)) {
                trans.push(if t.is_dead() { StateId::DEAD } else { renum[class_of(t.as_usize())] });
            }
        }
        Dfa {
            accepting: reps.iter().map(|&s| self.accepting[s]).collect(),
            byte_distance: reps.iter().map(|&s| self.byte_distance[s]).collect(),
            trans,
            ..self
        }
    }
}

/// A partition of `0..len` into sets, each a contiguous range of `slots`, with marking:
/// marked members are swapped to the front of their set, and `split` makes the smaller of
/// the marked and unmarked parts of each touched set a set of its own. What one mark reads
/// sits together (an element's place and set; a set's range and marks), for fewer cache
/// misses on large tables.
struct Refinable {
    /// The elements in set order, each with a value kept beside it (a cord's tails).
    slots: Vec<Slot>,
    /// Each element's place in `slots` and its set.
    place: Vec<Place>,
    sets: Vec<Set>,
    /// Sets with a marked member.
    touched: Vec<u32>,
}

#[derive(Clone, Copy)]
struct Slot {
    elem: u32,
    payload: u32,
}

#[derive(Clone, Copy)]
struct Place {
    at: u32,
    set: u32,
}

#[derive(Clone, Copy)]
struct Set {
    first: u32,
    past: u32,
    marked: u32,
}

impl Refinable {
    /// One set holding every element (none when `len` is 0), each with payload 0.
    fn new(len: usize) -> Refinable {
        Refinable {
            slots: (0..len as u32).map(|e| Slot { elem: e, payload: 0 }).collect(),
            place: (0..len as u32).map(|e| Place { at: e, set: 0 }).collect(),
            sets: if len > 0 { vec![Set { first: 0, past: len as u32, marked: 0 }] } else { Vec::new() },
            touched: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.sets.len()
    }

    fn members(&self, s: usize) -> &[Slot] {
        &self.slots[self.sets[s].first as usize..self.sets[s].past as usize]
    }

    fn set_of(&self, e: u32) -> usize {
        self.place[e as usize].set as usize
    }

    /// Marks `e` (an element already marked stays marked; one alone in its set, which
    /// cannot split, is not marked).
    #[inline]
    fn mark(&mut self, e: u32) {
        let Place { at: i, set: s } = self.place[e as usize];
        let set = &mut self.sets[s as usize];
        let j = set.first + set.marked;
        if i < j || set.past - set.first == 1 {
            return;
        }
        if set.marked == 0 {
            self.touched.push(s);
        }
        set.marked += 1;
        let other = self.slots[j as usize].elem;
        self.slots.swap(i as usize, j as usize);
        self.place[other as usize].at = i;
        self.place[e as usize].at = j;
    }

    /// Splits every touched set in two unless all of it is marked; the smaller part becomes
    /// the new set. Clears the marks.
    fn split(&mut self) {
        while let Some(s) = self.touched.pop() {
            let old = &mut self.sets[s as usize];
            let j = old.first + old.marked;
            old.marked = 0;
            if j == old.past {
                continue;
            }
            let new = if j - old.first <= old.past - j {
                let new = Set { first: old.first, past: j, marked: 0 };
                old.first = j;
                new
            } else {
                let new = Set { first: j, past: old.past, marked: 0 };
                old.past = j;
                new
            };
            let z = self.sets.len() as u32;
            self.sets.push(new);
            for slot in &self.slots[new.first as usize..new.past as usize] {
                self.place[slot.elem as usize].set = z;
            }
        }
    }
}
