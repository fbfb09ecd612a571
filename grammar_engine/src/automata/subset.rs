//! The subset construction: an NFA over bytes to a DFA, breadth-first, under the size limit,
//! deadline and cancel flag of a [`DfaConfig`].
//!
//! A DFA state is the set of NFA nodes that read bytes (the "kernel") reached after following
//! every empty move, and whether the match node was among them. Sets live in one arena, in
//! the order the closure met their members, and are found again as sets: by a hash that does
//! not depend on the order, then by checking a candidate's members against the marks the
//! closure left (no sorting). Each state is moved on one byte of each byte class.
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
use crate::util::StateId;

/// A node of an NFA.
pub(crate) type NodeId = u32;

/// Most moves (kernel members × byte classes) between two checks of the deadline.
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
    let mut members: Vec<NodeId> = Vec::new();
    // Moves made since the deadline was last checked: a state of a large kernel over many
    // classes is much work, so the check counts moves as well as states.
    let mut moves = 0usize;
    let mut next = 0usize;
    while next < sets.len() {
        if next % 256 == 255 || moves > CHECK_EVERY_MOVES {
            moves = 0;
            config.check_deadline("a DFA").inspect_err(|_| config.note_states(sets.len()))?;
            // The arena and the table, against the heap limit of the construction.
            if (sets.members.len() + raw_trans.len()).saturating_mul(4) > config.build_size_limit {
                return Err(GrammarError::TooLarge {
                    what: "determinization memory (bytes)",
                    limit: config.build_size_limit,
                    detail: format!("{} states of {} NFA nodes on average", sets.len(), sets.members.len() / sets.len()),
                });
            }
        }
        members.clear();
        members.extend_from_slice(sets.kernel(next));
        moves += members.len() * stride;
        for (class, &byte) in reps.iter().enumerate() {
            let moved = members.iter().filter_map(|&n| nfa.step(n, class, byte));
            let accepting = closure.run(nfa, moved);
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
