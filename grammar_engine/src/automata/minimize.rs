//! DFA minimization by Hopcroft's partition refinement.
//!
//! Fewer states means fewer rows of the token index to compute and hold: Unicode classes and
//! counted repeats leave many equivalent states behind. The refinement works on the partial
//! transition function (no dead sink: most of a JSON automaton's transitions are dead, and a
//! sink would be the largest splitter of all), over predecessor lists by byte class, and splits
//! blocks by marking, so each round costs the size of the splitter's predecessors, and each
//! split a pass over the classes: O(n·k + m log n) for n states, k classes and m live
//! transitions.

use super::Dfa;
use crate::util::{background, StateId};

/// Largest transition table (states × byte classes) [`Dfa::minimize`] works on.
pub(super) const MINIMIZE_MAX_ENTRIES: usize = 4_000_000;

impl Dfa {
    /// Merges equivalent states (Hopcroft's partition refinement). Fewer states means fewer
    /// rows to index: Unicode classes and counted repeats leave many duplicates behind, and each
    /// free-text state costs a full walk of the token trie. Skipped for tables of more than
    /// `MINIMIZE_MAX_ENTRIES` transitions.
    ///
    /// The table must be pruned ([`Dfa::prune`]): every state reaches acceptance, so a state
    /// with a transition on some class differs from one without, and splitting by the live
    /// transitions alone finds every difference, provided every block of the first partition
    /// is a splitter on every class. (A table with bytes cut, [`Dfa::with_bytes_cut`], may
    /// hold states that no longer reach acceptance: those would be kept, not dropped.)
    pub(crate) fn minimize(self) -> Dfa {
        let n = self.num_states();
        let k = self.stride;
        if n <= 1 || n.saturating_mul(k) > MINIMIZE_MAX_ENTRIES {
            return self;
        }
        // Predecessors by class, in CSR form: pred[pred_start[c*n+t]..] = states s with
        // s --c--> t, live transitions only.
        let mut counts = vec![0u32; k * n + 1];
        for s in 0..n {
            for (c, t) in self.row(StateId::from_index(s)).iter().enumerate() {
                if !t.is_dead() {
                    counts[c * n + t.as_usize() + 1] += 1;
                }
            }
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let pred_start = counts.clone();
        let mut fill = counts;
        background::pause_point();
        let mut pred = vec![0u32; pred_start[k * n] as usize];
        for s in 0..n {
            for (c, t) in self.row(StateId::from_index(s)).iter().enumerate() {
                if !t.is_dead() {
                    let slot = &mut fill[c * n + t.as_usize()];
                    pred[*slot as usize] = s as u32;
                    *slot += 1;
                }
            }
        }
        // The classes each state is entered on, in CSR form: a block is a splitter only on
        // the classes its members are entered on (on any other it would split nothing).
        background::pause_point();
        let mut in_start = vec![0u32; n + 1];
        for c in 0..k {
            for t in 0..n {
                if pred_start[c * n + t] < pred_start[c * n + t + 1] {
                    in_start[t + 1] += 1;
                }
            }
        }
        for t in 0..n {
            in_start[t + 1] += in_start[t];
        }
        let mut in_fill = in_start.clone();
        let mut in_class = vec![0u32; in_start[n] as usize];
        for c in 0..k {
            for t in 0..n {
                if pred_start[c * n + t] < pred_start[c * n + t + 1] {
                    in_class[in_fill[t] as usize] = c as u32;
                    in_fill[t] += 1;
                }
            }
        }
        let mut entered_on = vec![false; k];
        let mut entered: Vec<u32> = Vec::new();
        // The classes some member of `members` is entered on, into `entered` (and flagged).
        let classes_into = |members: &[u32], entered_on: &mut Vec<bool>, entered: &mut Vec<u32>| {
            for &c in entered.iter() {
                entered_on[c as usize] = false;
            }
            entered.clear();
            for &t in members {
                for &c in &in_class[in_start[t as usize] as usize..in_start[t as usize + 1] as usize] {
                    if !entered_on[c as usize] {
                        entered_on[c as usize] = true;
                        entered.push(c);
                    }
                }
            }
        };
        let mut part = Partition::new(n, |s| self.accepting[s]);
        let mut queued = vec![false; part.num_blocks() * k];
        let mut work: Vec<(u32, u32)> = Vec::new();
        for b in 0..part.num_blocks() {
            classes_into(part.members(b), &mut entered_on, &mut entered);
            for &c in &entered {
                queued[b * k + c as usize] = true;
                work.push((b as u32, c));
            }
        }
        let mut touched: Vec<u32> = Vec::new();
        let mut members: Vec<u32> = Vec::new();
        let mut rounds = 0u32;
        while let Some((b, c)) = work.pop() {
            rounds = rounds.wrapping_add(1);
            if rounds % 256 == 0 {
                background::pause_point();
            }
            queued[b as usize * k + c as usize] = false;
            // Mark every state that moves into block b on class c.
            touched.clear();
            members.clear();
            members.extend_from_slice(part.members(b as usize));
            for &t in &members {
                let lo = pred_start[c as usize * n + t as usize] as usize;
                let hi = pred_start[c as usize * n + t as usize + 1] as usize;
                for &s in &pred[lo..hi] {
                    if part.mark(s as usize) {
                        touched.push(part.block_of(s as usize) as u32);
                    }
                }
            }
            // `mark` reports each block once, so `touched` has no repeats.
            for &y in &touched {
                let y = y as usize;
                let Some(new) = part.split(y) else { continue };
                queued.resize(part.num_blocks() * k, false);
                // A class on which y waits to split others: both halves wait. On any other,
                // the smaller half is enough (Hopcroft), and only on the classes it is entered on.
                for d in 0..k {
                    if queued[y * k + d] {
                        queued[new * k + d] = true;
                        work.push((new as u32, d as u32));
                    }
                }
                let pick = if part.size(new) <= part.size(y) { new } else { y };
                classes_into(part.members(pick), &mut entered_on, &mut entered);
                for &d in &entered {
                    let d = d as usize;
                    if !queued[pick * k + d] {
                        queued[pick * k + d] = true;
                        work.push((pick as u32, d as u32));
                    }
                }
            }
        }
        if part.num_blocks() == n {
            return self;
        }
        background::pause_point();
        // Renumber blocks in order of their first state, so the start stays state 0.
        let mut renum = vec![StateId::DEAD; part.num_blocks()];
        let mut reps = Vec::new();
        for s in 0..n {
            let b = part.block_of(s);
            if renum[b].is_dead() {
                renum[b] = StateId::from_index(reps.len());
                reps.push(s);
            }
        }
        let mut trans = Vec::with_capacity(reps.len() * k);
        for &s in &reps {
            for &t in self.row(StateId::from_index(s)) {
                trans.push(if t.is_dead() { StateId::DEAD } else { renum[part.block_of(t.as_usize())] });
            }
        }
        Dfa {
            classes: self.classes,
            stride: self.stride,
            trans,
            accepting: reps.iter().map(|&s| self.accepting[s]).collect(),
            byte_distance: reps.iter().map(|&s| self.byte_distance[s]).collect(),
            class_rep: self.class_rep,
            class_size: self.class_size,
        }
    }
}

/// A partition of `0..n` into blocks, each a contiguous range of `elems`, with marking: marked
/// members are swapped to the front of their block, and `split` makes them a block of their own.
struct Partition {
    elems: Vec<u32>,
    loc: Vec<u32>,
    block: Vec<u32>,
    start: Vec<u32>,
    end: Vec<u32>,
    marked: Vec<u32>,
}

impl Partition {
    fn new(n: usize, first: impl Fn(usize) -> bool) -> Self {
        let mut elems: Vec<u32> = (0..n as u32).filter(|&s| first(s as usize)).collect();
        let split = elems.len() as u32;
        elems.extend((0..n as u32).filter(|&s| !first(s as usize)));
        let mut p = Partition { loc: vec![0; n], block: vec![0; n], elems, start: vec![], end: vec![], marked: vec![] };
        let ranges: Vec<(u32, u32)> = [(0, split), (split, n as u32)].into_iter().filter(|(a, b)| a < b).collect();
        for (b, &(lo, hi)) in ranges.iter().enumerate() {
            p.start.push(lo);
            p.end.push(hi);
            p.marked.push(0);
            for i in lo..hi {
                let s = p.elems[i as usize] as usize;
                p.loc[s] = i;
                p.block[s] = b as u32;
            }
        }
        p
    }

    fn num_blocks(&self) -> usize {
        self.start.len()
    }

    fn block_of(&self, s: usize) -> usize {
        self.block[s] as usize
    }

    fn size(&self, b: usize) -> usize {
        (self.end[b] - self.start[b]) as usize
    }

    fn members(&self, b: usize) -> &[u32] {
        &self.elems[self.start[b] as usize..self.end[b] as usize]
    }

    /// Marks `s`; returns true the first time its block gets a mark.
    fn mark(&mut self, s: usize) -> bool {
        let b = self.block[s] as usize;
        let pos = self.loc[s];
        let front = self.start[b] + self.marked[b];
        if pos < front {
            return false; // already marked
        }
        let other = self.elems[front as usize];
        self.elems.swap(pos as usize, front as usize);
        self.loc[other as usize] = pos;
        self.loc[s] = front;
        self.marked[b] += 1;
        self.marked[b] == 1
    }

    /// Splits the marked members of `b` off into a new block, unless all or none are marked.
    /// Returns the new block's id.
    fn split(&mut self, b: usize) -> Option<usize> {
        let m = self.marked[b];
        self.marked[b] = 0;
        if m == 0 || m == self.end[b] - self.start[b] {
            return None;
        }
        let new = self.start.len();
        let (lo, mid) = (self.start[b], self.start[b] + m);
        self.start.push(lo);
        self.end.push(mid);
        self.marked.push(0);
        self.start[b] = mid;
        for i in lo..mid {
            self.block[self.elems[i as usize] as usize] = new as u32;
        }
        Some(new)
    }
}
