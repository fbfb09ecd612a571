//! Budgets of a construction: the deadline (CPU time, with a wall-clock safety net), the cancel
//! flag, the state limits and the states-reached counter of a [`DfaConfig`], checked as states
//! appear.
//!
//! Every determinization (the subset construction, the lazy DFA walk, the products of the
//! algebra) asks here whether it may go on, and reports here how far it got, so a limit is
//! always the same typed [`GrammarError::TooLarge`] whichever construction hit it.

use std::sync::atomic::Ordering;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::minimize::MINIMIZE_MAX_ENTRIES;
use super::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::util::background;

/// When a compilation gives up, with the limit it came from (for the error message).
///
/// A compile limit counts the CPU time of the compiling thread (`cpu`), so that whether a
/// schema compiles does not depend on how busy the machine is; `at`, in wall-clock time, is a
/// safety net far above it (a compilation starved of CPU still ends). Time during which a
/// decoder held compilations ([`crate::util::background::hold`]) moves `at` later.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// Wall-clock time past which the work stops (plus the time compilations were held since
    /// the deadline was made).
    pub at: Instant,
    /// [`background::held_time`] when the deadline was made.
    held_from: Duration,
    /// When set: the CPU time of one thread past which the work stops (checked on that thread;
    /// elsewhere only `at` applies).
    pub cpu: Option<CpuDeadline>,
    pub limit_ms: u64,
}

/// A point in the CPU time of one thread.
#[derive(Debug, Clone, Copy)]
pub struct CpuDeadline {
    thread: ThreadId,
    at: Duration,
}

impl CpuDeadline {
    /// `budget` of CPU time from now, on the calling thread; `None` where threads have no CPU
    /// clock.
    pub fn after(budget: Duration) -> Option<CpuDeadline> {
        thread_cpu_time().map(|now| CpuDeadline { thread: std::thread::current().id(), at: now + budget })
    }
}

impl Deadline {
    /// A deadline at `at` in wall-clock time and, when given, at `cpu` in one thread's CPU time.
    pub fn new(at: Instant, cpu: Option<CpuDeadline>, limit_ms: u64) -> Deadline {
        Deadline { at, held_from: background::held_time(), cpu, limit_ms }
    }

    /// `limit_ms` milliseconds of wall-clock time from now.
    pub fn after_ms(limit_ms: u64) -> Deadline {
        Deadline::new(Instant::now() + Duration::from_millis(limit_ms), None, limit_ms)
    }

    /// Whether the deadline has passed: the wall-clock one, or the CPU one when called on its
    /// thread.
    pub fn passed(&self) -> bool {
        let now = Instant::now();
        if now > self.at && now > self.at + background::held_time().saturating_sub(self.held_from) {
            return true;
        }
        match self.cpu {
            Some(c) if c.thread == std::thread::current().id() => thread_cpu_time().is_some_and(|now| now > c.at),
            _ => false,
        }
    }
}

/// The CPU time the calling thread has used (`None` where there is no per-thread clock).
pub fn thread_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `t` is a valid timespec for the call to fill.
        let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
        ok.then(|| Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
    }
    #[cfg(not(unix))]
    {
        None
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
    /// enough to call every few hundred states. Also where a compilation pauses while a
    /// decoder holds compilations ([`background::pause_point`]).
    pub(crate) fn check_deadline(&self, what: &str) -> Result<()> {
        background::pause_point();
        if self.cancelled() {
            return Err(GrammarError::TooLarge {
                what: "compile CPU time (ms)",
                limit: self.deadline.map_or(0, |d| d.limit_ms as usize),
                detail: format!("cancelled while building {what}"),
            });
        }
        match self.deadline {
            Some(d) if d.passed() => Err(GrammarError::TooLarge {
                what: "compile CPU time (ms)",
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
