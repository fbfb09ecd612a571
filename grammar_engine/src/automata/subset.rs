//! The subset construction: an NFA over bytes to a DFA, breadth-first, under the size limit,
//! deadline and cancel flag of a [`DfaConfig`].
//!
//! A DFA state is the set of NFA nodes that read bytes (the "kernel") reached after following
//! every empty move, and whether the match node was among them. Sets live in one arena, in
//! the order the closure met their members, and are found again as sets: by a hash that does
//! not depend on the order, then by checking a candidate's members against the marks the
//! closure left (no sorting). A state's moves are its kernel members' moves grouped by byte
//! class; each member's moves are found once, on one byte of each class.
//!
//! Two automata are determinized here: the [`crate::automata::glued_nfa`] of a grammar expression, and
//! the Thompson NFA `regex-automata` compiles a regex to (without look-around assertions;
//! those go to `regex-automata`'s own lazy DFA, see [`crate::automata::Dfa::from_nfa`]). For both,
//! this is several times faster than driving the lazy DFA state by state: no state
//! re-encoding, no cryptographic hash, and no cache bookkeeping per transition.

use regex_automata::nfa::thompson::{self, State};
use regex_automata::util::primitives::StateID;

use super::build::no_full_match;
use super::dfa::class_tables;
use super::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::util::int_hash::IntMap;
use crate::util::{background, StateId};

/// A node of an NFA.
pub(crate) type NodeId = u32;

/// Most work (kernel members, steps, moves grouped and closure members) between two checks of
/// the deadline.
const CHECK_EVERY_MOVES: usize = 1 << 20;

/// What a node of an NFA is, for the closure that visits it.
pub(crate) enum Visit {
    /// It reads a byte: a kernel member.
    Reads,
    /// It only leads on by empty moves (or nowhere).
    Passes,
    /// It is the match node.
    Matches,
}

/// An NFA over bytes, as the subset construction sees it.
pub(crate) trait Automaton {
    fn num_nodes(&self) -> usize;
    /// Calls `push` on every node one empty move from `node` away; says what `node` is.
    fn expand(&self, node: NodeId, push: impl FnMut(NodeId)) -> Visit;
    /// Where a kernel node goes on a byte of class `class` (`byte` is one of them).
    fn step(&self, node: NodeId, class: usize, byte: u8) -> Option<NodeId>;
}

/// Determinizes `nfa` from `start` (full-match semantics) over the byte classes `classes`
/// (with `reps[c]` a byte of class `c`; every byte of a class must move every node alike),
/// then prunes and minimizes the result. An [`GrammarError::EmptyLanguage`] when no string is
/// accepted; a typed `TooLarge` error past [`DfaConfig::raw_state_limit`] states, the
/// deadline or a cancel.
pub(crate) fn determinize(
    nfa: &impl Automaton,
    start: NodeId,
    classes: [u8; 256],
    reps: &[u8],
    config: &DfaConfig,
) -> Result<Dfa> {
    let stride = reps.len();
    let limit = config.raw_state_limit(stride);
    let mut sets = Sets::default();
    let mut closure = Closure::new(nfa.num_nodes());
    let start_accepting = closure.run(nfa, std::iter::once(start));
    sets.insert(Sets::hash(&closure.kernel, start_accepting), &closure.kernel, start_accepting);
    let mut raw_trans: Vec<StateId> = Vec::new();
    let mut moves = Moves::new(nfa.num_nodes());
    let mut buckets = Buckets::new(stride);
    // Work done since the deadline was last checked: a state of a large kernel over many
    // classes is much work, so the check counts moves as well as states.
    let mut work = 0usize;
    let mut next = 0usize;
    while next < sets.len() {
        if next % 256 == 255 || work > CHECK_EVERY_MOVES {
            work = 0;
            config.check_deadline("a DFA").inspect_err(|_| config.note_states(sets.len()))?;
            // The arena, the table and the moves, against the heap limit of the construction.
            let words = sets.members.len() + raw_trans.len() + 2 * moves.pairs.len() + 4 * moves.span.len();
            if words.saturating_mul(4) > config.build_size_limit {
                return Err(GrammarError::TooLarge {
                    what: "determinization memory (bytes)",
                    limit: config.build_size_limit,
                    detail: format!("{} states of {} NFA nodes on average", sets.len(), sets.members.len() / sets.len()),
                });
            }
        }
        background::pause_point();
        work += buckets.fill(sets.kernel(next), &mut moves, nfa, reps);
        for class in 0..stride {
            let bucket = buckets.of(class);
            // No member moves on this class: the closure of nothing is the dead state.
            if bucket.is_empty() {
                raw_trans.push(StateId::DEAD);
                continue;
            }
            let accepting = closure.run(nfa, bucket.iter().copied());
            work += closure.kernel.len();
            if closure.kernel.is_empty() && !accepting {
                raw_trans.push(StateId::DEAD);
                continue;
            }
            let hash = Sets::hash(&closure.kernel, accepting);
            let id = match sets.find(hash, &closure, accepting) {
                Some(id) => id,
                None if sets.len() >= limit => return Err(config.determinization_overflow(sets.len())),
                None => sets.insert(hash, &closure.kernel, accepting),
            };
            raw_trans.push(id);
        }
        next += 1;
    }
    config.check_deadline("a DFA")?;
    let dfa = Dfa::from_table(classes, stride, &raw_trans, &sets.accepting).ok_or_else(no_full_match)?;
    config.check_built(&dfa)?;
    Ok(dfa)
}

/// One byte of each class of `classes` (classes numbered from 0 with none skipped).
pub(crate) fn representatives(classes: &[u8; 256]) -> Vec<u8> {
    let count = classes.iter().map(|&c| c as usize + 1).max().unwrap_or(1);
    class_tables(classes, count).0
}

/// Each kernel node's moves as (class, target) pairs, found the first time the node is in a
/// kernel: a node belongs to many DFA states, and most nodes move on few of the classes.
struct Moves {
    /// Node `n`'s pairs are `pairs[span[n].0..span[n].1]`; `span[n].0 == UNSEEN` before.
    span: Vec<(usize, usize)>,
    pairs: Vec<(u32, NodeId)>,
}

const UNSEEN: usize = usize::MAX;

impl Moves {
    fn new(nodes: usize) -> Moves {
        Moves {
            span: vec![(UNSEEN, 0); nodes],
            pairs: Vec::new(),
        }
    }

    /// Finds node `n`'s moves if not yet found; the number of steps that took.
    fn find(&mut self, nfa: &impl Automaton, n: NodeId, reps: &[u8]) -> usize {
        if self.span[n as usize].0 != UNSEEN {
            return 0;
        }
        let start = self.pairs.len();
        for (class, &byte) in reps.iter().enumerate() {
            if let Some(t) = nfa.step(n, class, byte) {
                self.pairs.push((class as u32, t));
            }
        }
        self.span[n as usize] = (start, self.pairs.len());
        reps.len()
    }

    fn of(&self, n: NodeId) -> &[(u32, NodeId)] {
        let (start, end) = self.span[n as usize];
        &self.pairs[start..end]
    }
}

/// The targets of one DFA state's kernel, grouped by the class they are reached on.
struct Buckets {
    /// Class `c`'s targets are `targets[offsets[c]..offsets[c + 1]]`.
    offsets: Vec<usize>,
    targets: Vec<NodeId>,
}

impl Buckets {
    fn new(stride: usize) -> Buckets {
        Buckets {
            offsets: vec![0; stride + 1],
            targets: Vec::new(),
        }
    }

    /// Groups the moves of `kernel`'s members by class (a counting sort); the work it took.
    fn fill(&mut self, kernel: &[NodeId], moves: &mut Moves, nfa: &impl Automaton, reps: &[u8]) -> usize {
        let mut work = kernel.len();
        self.offsets.iter_mut().for_each(|o| *o = 0);
        for &n in kernel {
            work += moves.find(nfa, n, reps);
            for &(class, _) in moves.of(n) {
                self.offsets[class as usize + 1] += 1;
            }
        }
        for c in 1..self.offsets.len() {
            self.offsets[c] += self.offsets[c - 1];
        }
        let total = self.offsets[self.offsets.len() - 1];
        work += total;
        self.targets.resize(total, 0);
        // Each class's next free slot, taken from the start of the class after it and
        // restored by the fill: `offsets[c + 1]` walks from class c's start to its end.
        let stride = self.offsets.len() - 1;
        for c in (1..=stride).rev() {
            self.offsets[c] = self.offsets[c - 1];
        }
        for &n in kernel {
            for &(class, t) in moves.of(n) {
                let slot = &mut self.offsets[class as usize + 1];
                self.targets[*slot] = t;
                *slot += 1;
            }
        }
        work
    }

    fn of(&self, class: usize) -> &[NodeId] {
        &self.targets[self.offsets[class]..self.offsets[class + 1]]
    }
}

/// The epsilon closure of a set of nodes, its buffers reused from one move to the next.
struct Closure {
    /// The kernel of the last closure, in the order its members were met.
    kernel: Vec<NodeId>,
    stack: Vec<NodeId>,
    /// `seen[n] == generation` when node `n` is in the current closure.
    seen: Vec<u32>,
    generation: u32,
}

impl Closure {
    fn new(nodes: usize) -> Closure {
        Closure {
            kernel: Vec::new(),
            stack: Vec::new(),
            seen: vec![0; nodes],
            generation: 0,
        }
    }

    /// Follows every empty move from `from`, leaving the kernel in `self.kernel`; whether the
    /// match node was reached.
    fn run(&mut self, nfa: &impl Automaton, from: impl Iterator<Item = NodeId>) -> bool {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        let generation = self.generation;
        let Closure {
            kernel,
            stack,
            seen,
            ..
        } = self;
        kernel.clear();
        stack.clear();
        let mut visit = |n: NodeId, stack: &mut Vec<NodeId>| {
            if seen[n as usize] != generation {
                seen[n as usize] = generation;
                stack.push(n);
            }
        };
        for n in from {
            visit(n, stack);
        }
        let mut matched = false;
        while let Some(n) = stack.pop() {
            match nfa.expand(n, |t| visit(t, stack)) {
                Visit::Reads => kernel.push(n),
                Visit::Passes => {}
                Visit::Matches => matched = true,
            }
        }
        matched
    }

    /// Whether node `n` is in the last closure (for a kernel node: in the kernel).
    fn contains(&self, n: NodeId) -> bool {
        self.seen[n as usize] == self.generation
    }
}

/// The DFA states made so far: each a kernel (in one arena) and whether it accepts,
/// found again by hash.
#[derive(Default)]
struct Sets {
    members: Vec<NodeId>,
    /// Set `i`'s kernel is `members[starts[i]..starts[i + 1]]` (the last one's runs to the end).
    starts: Vec<usize>,
    accepting: Vec<bool>,
    /// The last set made with each hash; per set, the one made before it with the same hash.
    by_hash: IntMap<u64, StateId>,
    older: Vec<Option<StateId>>,
}

impl Sets {
    fn len(&self) -> usize {
        self.accepting.len()
    }

    fn kernel(&self, i: usize) -> &[NodeId] {
        let end = self
            .starts
            .get(i + 1)
            .copied()
            .unwrap_or(self.members.len());
        &self.members[self.starts[i]..end]
    }

    /// A hash of the set, whatever the order of its members: the sum of each member's mix.
    fn hash(kernel: &[NodeId], accepting: bool) -> u64 {
        let mix = |n: NodeId| {
            let x = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x ^ (x >> 29)
        };
        kernel.iter().fold(accepting as u64, |h, &n| h.wrapping_add(mix(n)))
    }

    /// The set equal to the last closure's kernel with `accepting`, if one was made: equal
    /// size, and every member in the closure.
    fn find(&self, hash: u64, closure: &Closure, accepting: bool) -> Option<StateId> {
        let kernel = &closure.kernel;
        let mut next = self.by_hash.get(&hash).copied();
        while let Some(id) = next {
            let other = self.kernel(id.as_usize());
            if self.accepting[id.as_usize()] == accepting
                && other.len() == kernel.len()
                && other.iter().all(|&n| closure.contains(n))
            {
                return Some(id);
            }
            next = self.older[id.as_usize()];
        }
        None
    }

    fn insert(&mut self, hash: u64, kernel: &[NodeId], accepting: bool) -> StateId {
        let id = StateId::from_index(self.len());
        self.starts.push(self.members.len());
        self.members.extend_from_slice(kernel);
        self.accepting.push(accepting);
        let older = self.by_hash.insert(hash, id);
        self.older.push(older);
        id
    }
}

/// A Thompson NFA without look-around assertions, as an [`Automaton`].
pub(crate) struct ThompsonView<'a>(&'a thompson::NFA);

impl<'a> ThompsonView<'a> {
    /// The view of `nfa`, which must have no look-around assertion (see `expand`).
    pub(crate) fn new(nfa: &'a thompson::NFA) -> ThompsonView<'a> {
        debug_assert!(nfa.look_set_any().is_empty(), "assertions need the lazy DFA");
        ThompsonView(nfa)
    }
}

impl Automaton for ThompsonView<'_> {
    fn num_nodes(&self) -> usize {
        self.0.states().len()
    }

    fn expand(&self, node: NodeId, mut push: impl FnMut(NodeId)) -> Visit {
        match self.0.state(StateID::new_unchecked(node as usize)) {
            State::ByteRange { .. } | State::Sparse(_) | State::Dense(_) => Visit::Reads,
            State::Union { alternates } => {
                alternates.iter().for_each(|s| push(s.as_u32()));
                Visit::Passes
            }
            State::BinaryUnion { alt1, alt2 } => {
                push(alt1.as_u32());
                push(alt2.as_u32());
                Visit::Passes
            }
            State::Capture { next, .. } => {
                push(next.as_u32());
                Visit::Passes
            }
            // Automata with assertions are not handed here (they need the lazy DFA's look-
            // behind state); should one come, an assertion matches nothing, as `Fail` does.
            State::Look { .. } | State::Fail => Visit::Passes,
            State::Match { .. } => Visit::Matches,
        }
    }

    fn step(&self, node: NodeId, _class: usize, byte: u8) -> Option<NodeId> {
        let next = match self.0.state(StateID::new_unchecked(node as usize)) {
            State::ByteRange { trans } => trans.matches_byte(byte).then_some(trans.next),
            State::Sparse(s) => s.matches_byte(byte),
            State::Dense(d) => d.matches_byte(byte),
            _ => None,
        };
        next.map(|s| s.as_u32())
    }
}

#[cfg(test)]
mod tests;
