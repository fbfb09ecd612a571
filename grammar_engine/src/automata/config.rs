//! The limits one compilation runs under.
//!
//! A [`DfaConfig`] travels with every construction in [`crate::automata`]: the state limit,
//! the heap limit of NFA building and determinization, and the optional deadline, cancel flag,
//! state counter and regex memo that the JSON Schema compiler's restriction ladder uses. How
//! these limits are checked while a construction runs is in [`super::budget`].

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use super::budget::Deadline;
use super::regex_memo::RegexMemo;

/// Size limits for compiling a regex.
#[derive(Debug, Clone)]
pub struct DfaConfig {
    /// Most DFA states kept after pruning.
    pub max_states: usize,
    /// Heap limit, in bytes, for building an NFA and determinizing it (regex-automata's
    /// Thompson NFA, the glued NFA of a grammar expression, the subset construction's sets).
    pub build_size_limit: usize,
    /// When set, determinization and products stop with a typed `TooLarge` error once it has
    /// passed (a pattern such as `.*a.{20}b` grows exponentially and would otherwise spend
    /// tens of seconds before the state limit triggers).
    pub deadline: Option<Deadline>,
    /// When set, an NFA with more states than this many times `max_states` is refused before
    /// determinizing (a typed `TooLarge` error). Measured on JSONSchemaBench's slowest schemas:
    /// of 46 automaton expressions past 4× the state limit none fitted, of 35 between 2× and 4×
    /// one did, and each took up to 3 s to find out. The JSON Schema compiler sets 2, since a
    /// more restricted retry follows.
    pub nfa_states_factor: Option<usize>,
    /// When set, the most states a determinization under this config reached: the live states
    /// of the DFA it built, or how many it had made when a limit stopped it. The JSON Schema
    /// compiler's restriction ladder predicts from it whether a smaller attempt can fit.
    pub states_reached: Option<Arc<AtomicU64>>,
    /// When set and raised, determinization and products stop as at the deadline. The JSON
    /// Schema compiler's restriction ladder raises it for attempts whose answer it no longer
    /// needs.
    pub cancel: Option<Arc<AtomicBool>>,
    /// When set, [`Dfa::from_regex`](super::Dfa::from_regex) builds each regex text once and copies it afterwards.
    /// The JSON Schema compiler sets one per compilation (see [`RegexMemo`]).
    pub memo: Option<Arc<RegexMemo>>,
}

impl Default for DfaConfig {
    fn default() -> Self {
        DfaConfig {
            max_states: 100_000,
            build_size_limit: 512 << 20,
            deadline: None,
            nfa_states_factor: None,
            states_reached: None,
            cancel: None,
            memo: None,
        }
    }
}

impl DfaConfig {
    /// This config with a memo: its own, or a new one (for one compilation).
    pub(crate) fn with_memo(&self) -> DfaConfig {
        DfaConfig { memo: Some(self.memo.clone().unwrap_or_default()), ..self.clone() }
    }
}
