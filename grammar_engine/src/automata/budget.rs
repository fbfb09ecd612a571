//! Budgets of a construction: the deadline, the cancel flag, the state limits and the
//! states-reached counter of a [`DfaConfig`], checked as states appear.
//!
//! Every determinization (the subset construction, the lazy DFA walk, the products of the
//! algebra) asks here whether it may go on, and reports here how far it got, so a limit is
//! always the same typed [`GrammarError::TooLarge`] whichever construction hit it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::minimize::MINIMIZE_MAX_ENTRIES;
use super::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};

/// A point in time past which a compilation gives up, with the limit it came from (for the
/// error message).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub at: Instant,
    pub limit_ms: u64,
}

impl Deadline {
    /// `limit_ms` milliseconds from now.
    pub fn after_ms(limit_ms: u64) -> Deadline {
        Deadline { at: Instant::now() + Duration::from_millis(limit_ms), limit_ms }
    }
}

impl DfaConfig {
    /// With `nfa_states_factor` set: a typed `TooLarge` error when an NFA of `states` states
    /// (`estimated`: an estimate, allowed twice the room, see [`crate::automata::Expr::to_dfa`])
    /// is past that many times `max_states`.
    pub(crate) fn check_nfa_states(&self, states: u64, estimated: bool) -> Result<()> {
        let Some(factor) = self.nfa_states_factor else { return Ok(()) };
        let most = self.max_states.saturating_mul(factor).saturating_mul(if estimated { 2 } else { 1 });
        if states <= most as u64 {
            return Ok(());
        }
        let has = if estimated { "would have about" } else { "has" };
        Err(GrammarError::TooLarge {
            what: "regex DFA",
            limit: self.max_states,
            detail: format!("its NFA {has} {states} states, past {factor}× the DFA state limit"),
        })
    }

    /// Records that a determinization reached `states` states (see `states_reached`).
    pub(crate) fn note_states(&self, states: usize) {
        if let Some(reached) = &self.states_reached {
            reached.fetch_max(states as u64, Ordering::Relaxed);
        }
    }

    /// A typed error when the deadline (if any) has passed or the work was cancelled. Cheap
    /// enough to call every few hundred states.
    pub(crate) fn check_deadline(&self, what: &str) -> Result<()> {
        if self.cancelled() {
            return Err(GrammarError::TooLarge {
                what: "compile time (ms)",
                limit: self.deadline.map_or(0, |d| d.limit_ms as usize),
                detail: format!("cancelled while building {what}"),
            });
        }
        match self.deadline {
            Some(d) if Instant::now() > d.at => Err(GrammarError::TooLarge {
                what: "compile time (ms)",
                limit: d.limit_ms as usize,
                detail: format!("gave up while building {what}"),
            }),
            _ => Ok(()),
        }
    }

    /// Most raw states a determinization over `stride` byte classes makes before it gives up:
    /// twice `max_states` (minimizing may merge states), but only `max_states` (and 64) once
    /// the table is too large to minimize, since it will not shrink below the limit then (only pruning
    /// could: it dropped a single state in each of the 1,838 determinizations past 2,000
    /// states of JSONSchemaBench's slowest schemas).
    pub(crate) fn raw_state_limit(&self, stride: usize) -> usize {
        let unminimized = MINIMIZE_MAX_ENTRIES / stride.max(1);
        let limit = self.max_states.saturating_mul(2).saturating_add(64);
        limit.min(unminimized.max(self.max_states.saturating_add(64)))
    }

    /// The error of a determinization that reached `states` states and stopped (noted as
    /// reached).
    pub(crate) fn determinization_overflow(&self, states: usize) -> GrammarError {
        self.note_states(states);
        GrammarError::TooLarge {
            what: "regex DFA",
            limit: self.max_states,
            detail: format!("more than {states} states while determinizing"),
        }
    }

    /// Notes the states of a finished determinization; a typed error past the state limit.
    pub(crate) fn check_built(&self, dfa: &Dfa) -> Result<()> {
        self.note_states(dfa.num_states());
        if dfa.num_states() > self.max_states {
            return Err(GrammarError::TooLarge {
                what: "regex DFA",
                limit: self.max_states,
                detail: format!("{} live states", dfa.num_states()),
            });
        }
        Ok(())
    }

    /// Whether the cancel flag (if any) is raised.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed))
    }
}
