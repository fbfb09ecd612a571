//! Validation and minimal-edit repair of a byte string against a [`Dfa`].
//!
//! [`validate`] says whether a text fully matches and, if not, where the match breaks.
//! [`repair`] finds a string of the DFA's language at the smallest weighted edit distance from
//! the text (byte insertions, deletions and substitutions), under one of two cost models
//! ([`CostModel`]): plain edit costs, or the context-dependent intent model whose cheapest
//! repair is the one a person would make (prose around the value deleted, quotes swapped, a
//! truncated value closed).
//!
//! # The search graph
//!
//! Nodes are `(i, s)`: `i` text bytes consumed, DFA state `s`. From `(i, s)`:
//!
//! * keep `text[i]` when `next(s, text[i])` is live: cost 0 (the intent model prices keeping
//!   a quote-like `'`), to `(i + 1, next)`;
//! * delete `text[i]`: `delete_cost`, to `(i + 1, s)`;
//! * substitute `text[i]` by a byte `b != text[i]` with a live transition: `substitute_cost`,
//!   to `(i + 1, next(s, b))`;
//! * insert a byte `b` with a live transition: `insert_cost`, to `(i, next(s, b))`.
//!
//! The goal is any `(len, s)` with `s` accepting. Since the DFA only accepts valid UTF-8 (it is
//! built in Unicode mode), every repaired text is valid UTF-8, whatever the input bytes were.
//!
//! # How a repair is found
//!
//! A greedy completion of the start node gives a first valid answer. A forward A* search with
//! a consistent heuristic then looks for cheaper ones, pruning against the best so far. When
//! the forward search takes long, it alternates with a backward Dijkstra from the goals that
//! sharpens the heuristic and meets it in the middle. When the caller's deadline or expansion
//! budget runs out, the best answer so far is returned with a proven lower bound.
//!
//! # Layout
//!
//! One concept per file:
//!
//! * `cost`: the cost models, and the tie-breaking "damage" folded into the internal cost;
//! * `groups`: each state's transitions collapsed to one representative byte per target and
//!   price class, and each state's class for the cost model;
//! * `table`: the node table both directions record costs and parent links in;
//! * `greedy`: completion without search (the first incumbent and the anytime answer);
//! * `search`: the forward A*, its heuristic, and the driver alternating the two directions;
//! * `backward`: the backward Dijkstra and the heuristic and solutions it gives;
//! * `path`: from parent links to edits, and from edits to a [`RepairResult`].

mod backward;
mod cost;
mod greedy;
mod groups;
mod path;
mod search;
mod table;
#[cfg(test)]
pub(crate) mod test_support;

use std::time::{Duration, Instant};

use crate::automata::Dfa;
use cost::{keep_costs, Weights};
pub use cost::{CostModel, IntentWeights};
use greedy::greedy_tail;
use groups::Groups;
use path::finish;
use search::Search;
use table::{DenseTable, SparseTable, DENSE_MAX_ENTRIES};

/// Whether a text fully matches, and where it stops matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validation {
    /// The whole text is in the language.
    pub valid: bool,
    /// `None` when valid. Otherwise the offset of the first byte that makes a match impossible,
    /// or `text.len()` when every byte is fine but the text stops before a full match.
    pub error_offset: Option<usize>,
}

/// Checks `text` against `dfa` with full-match semantics.
pub fn validate(dfa: &Dfa, text: &[u8]) -> Validation {
    let mut state = dfa.start();
    for (offset, &b) in text.iter().enumerate() {
        state = dfa.next(state, b);
        if state.is_dead() {
            return Validation { valid: false, error_offset: Some(offset) };
        }
    }
    if dfa.is_accepting(state) {
        Validation { valid: true, error_offset: None }
    } else {
        Validation { valid: false, error_offset: Some(text.len()) }
    }
}

/// Edit costs and search limits for [`repair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairOptions {
    /// How edits are priced. [`CostModel::Edit`] (the default here) uses the three costs below;
    /// [`CostModel::Intent`] ignores them. (The Python API defaults to the intent model.)
    pub model: CostModel,
    pub insert_cost: u32,
    pub delete_cost: u32,
    pub substitute_cost: u32,
    /// Give up (with [`RepairStatus::NoRepairWithinMaxCost`]) when every repair costs more.
    pub max_cost: Option<u32>,
    /// Wall-clock budget for the search, measured from the call.
    pub deadline: Option<Duration>,
    /// Budget of node expansions.
    pub max_expansions: Option<usize>,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            model: CostModel::Edit,
            insert_cost: 1,
            delete_cost: 1,
            substitute_cost: 1,
            max_cost: None,
            deadline: None,
            max_expansions: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepairStatus {
    /// `text` is a cheapest repair; `cost == lower_bound`.
    Optimal,
    /// The deadline or the expansion budget ran out first: `text` is the best repair found so
    /// far, and its cost may exceed the optimum, which is at least `lower_bound`.
    Anytime,
    /// Every repair costs more than `max_cost`; no text.
    NoRepairWithinMaxCost,
    /// The budget ran out before any repair within `max_cost` was found; no text.
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EditKind {
    Insert,
    Delete,
    Substitute,
}

/// One edit. Offsets refer to the original text; an insertion at `offset` goes before the
/// original byte `text[offset]` (or at the end when `offset == text.len()`). Edits are listed
/// in text order, so applying them left to right rebuilds the repaired text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Edit {
    pub kind: EditKind,
    pub offset: usize,
    /// The original byte (deletions and substitutions).
    pub old: Option<u8>,
    /// The new byte (insertions and substitutions).
    pub new: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairResult {
    pub status: RepairStatus,
    /// The repaired text (fully matches the DFA); `None` for `NoRepairWithinMaxCost` and
    /// `NotFound`.
    pub text: Option<Vec<u8>>,
    /// Sum of the edit costs of `edits`; `None` when there is no text.
    pub cost: Option<u32>,
    /// A proven lower bound on the cost of an optimal repair.
    pub lower_bound: u32,
    /// The edits turning the input into `text`, in text order.
    pub edits: Vec<Edit>,
    /// Nodes expanded by the search.
    pub expansions: usize,
}

/// Finds a cheapest edit of `text` into the language of `dfa`. See the module documentation.
pub fn repair(dfa: &Dfa, text: &[u8], opts: &RepairOptions) -> RepairResult {
    repair_impl(dfa, text, opts, Tuning::for_len(text.len()))
}

/// Expansion allowances of the first forward and backward phases; the search alternates
/// between the two directions, doubling both allowances each round.
#[derive(Debug, Clone, Copy)]
struct Tuning {
    forward_first: usize,
    backward_first: usize,
    /// Use the hash-map node table whatever the size.
    sparse: bool,
}

impl Tuning {
    fn for_len(len: usize) -> Self {
        Tuning { forward_first: 1024 + len, backward_first: 512 + len / 2, sparse: false }
    }
}

/// The answer for a text that is valid already: itself, at no cost.
pub fn unchanged(text: &[u8]) -> RepairResult {
    RepairResult { status: RepairStatus::Optimal, text: Some(text.to_vec()), cost: Some(0), lower_bound: 0, edits: Vec::new(), expansions: 0 }
}

/// [`repair`] under an explicit schedule (the tests cross-check several).
fn repair_impl(dfa: &Dfa, text: &[u8], opts: &RepairOptions, tuning: Tuning) -> RepairResult {
    let started = Instant::now();
    if validate(dfa, text).valid {
        return unchanged(text);
    }
    let weights = Weights::new(opts, text);
    let mut groups = Groups::new(dfa);
    let (keep, keep_rest) = keep_costs(text, &weights);
    if text.len() >= (u32::MAX - 1) as usize {
        // Positions would not fit the node keys: answer with the greedy repair alone.
        let mut edits = Vec::new();
        greedy_tail(dfa, text, &mut groups, &weights, &keep, 0, dfa.start(), &mut edits);
        return finish(dfa, text, &mut groups, &weights, &keep, RepairStatus::Anytime, 0, edits, 0);
    }
    let entries = (text.len() + 1).saturating_mul(dfa.num_states());
    if !tuning.sparse && entries <= DENSE_MAX_ENTRIES {
        Search::<DenseTable>::new(dfa, text, opts, weights, groups, keep, keep_rest, started).run(tuning)
    } else {
        Search::<SparseTable>::new(dfa, text, opts, weights, groups, keep, keep_rest, started).run(tuning)
    }
}

#[cfg(test)]
mod tests;
