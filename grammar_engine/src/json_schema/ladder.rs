//! The restriction ladder: the exact attempt first, then sound restrictions in turn; the least
//! restricted attempt whose automaton fits is the grammar.
//!
//! A schema that needs a restriction spends most of its compile time learning that the exact
//! automaton does not fit (the determinization runs up to the state limit before it knows). So
//! when an attempt has run for [`HELP_AFTER`], helper threads start the next attempts beside it
//! (up to [`JsonSchemaOptions::threads`] at once). The outcome is the same as one attempt after
//! another would give: an attempt's answer counts only once every less restricted one has
//! failed, and a fitting attempt cancels the more restricted ones still running. Only the
//! predictions ([`Overflow`]) may see fewer failed attempts than in a sequential run, and they
//! only ever skip work.
//!
//! Each attempt may use half of `max_compile_ms` of its own thread's CPU time, whatever the
//! others used, so whether a schema compiles, and how restricted, depends on the schema alone,
//! not on how busy the machine is or how the attempts were spread over threads. A wall-clock
//! limit of [`WALL_SAFETY`] times `max_compile_ms` for the whole ladder still ends a
//! compilation starved of CPU.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::walk::Taken;
use super::{walk, JsonSchemaOptions};
use crate::automata::{CpuDeadline, Deadline, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::pushdown::{Compiled, RtnBuilder};
use crate::util::background;

/// How long the attempt running alone may take before helpers start the next ones: most
/// schemas compile well within it, and then no second thread does any work.
const HELP_AFTER: Duration = Duration::from_millis(50);

/// The wall-clock safety net of a compilation, in multiples of `max_compile_ms`.
const WALL_SAFETY: u32 = 8;

/// The sound restrictions tried, in turn, when the exact automaton is over a limit.
///
/// - A count cap: large `maxItems`/`maxLength` bounds multiply states (100 items of strings up
///   to 1024 characters need 100 × 1024 of them); upper bounds above the cap are lowered to
///   it (never below the lower bound).
/// - A prune depth: a schema of hundreds of nested optional properties (a Kubernetes object,
///   a web API's resource) is one automaton with a copy of every nested object at every place
///   it can occur. Objects at least that deep keep only their required members (and those
///   `minProperties` needs), arrays only the elements `minItems` needs.
///
/// Each keeps fewer texts than the schema allows, never an invalid one, and counts only when
/// the less restricted attempts did not fit. A cap is tried only when some bound is large; a
/// prune depth that leaves nothing out is not determinized again.
pub(super) const RESTRICTIONS: [Restriction; 8] = [
    Restriction { count_cap: None, prune_depth: None },
    Restriction { count_cap: Some(16), prune_depth: None },
    Restriction { count_cap: Some(4), prune_depth: None },
    Restriction { count_cap: Some(4), prune_depth: Some(6) },
    Restriction { count_cap: Some(4), prune_depth: Some(4) },
    Restriction { count_cap: Some(4), prune_depth: Some(3) },
    Restriction { count_cap: Some(4), prune_depth: Some(2) },
    Restriction { count_cap: Some(4), prune_depth: Some(1) },
];

/// One step of [`RESTRICTIONS`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Restriction {
    count_cap: Option<u64>,
    prune_depth: Option<usize>,
}

impl Restriction {
    /// What the restriction leaves out, in words (`capped`: its walk met a bound the cap
    /// lowers; `taken`: what the walk restricted on its own); `None` for the exact attempt
    /// when the walk took nothing.
    fn describe(&self, capped: bool, taken: &Taken) -> Option<String> {
        let cap = self.count_cap.filter(|_| capped).map(|c| format!("maxItems and maxLength above {c} lowered to {c}"));
        let lowered = taken
            .lowered
            .filter(|&l| self.count_cap.is_none_or(|c| l < c))
            .map(|l| format!("maxLength too long to count lowered to {l}"));
        let cap = match (cap, lowered) {
            (Some(c), Some(l)) => Some(format!("{c}; {l}")),
            (c, l) => c.or(l),
        };
        let prune = self.prune_depth.map(|d| {
            format!("objects {d} or more levels deep keep only required members, arrays that deep only minItems elements")
        });
        let parts: Vec<String> = cap.into_iter().chain(prune).collect();
        let large = (!parts.is_empty()).then(|| format!("the exact grammar is too large: {}", parts.join("; ")));
        let all: Vec<String> = large.into_iter().chain(taken.notes.iter().map(|n| n.to_string())).collect();
        (!all.is_empty()).then(|| all.join("; "))
    }

    /// Only a count cap: the same automaton as the exact attempt when no bound is large.
    fn caps_only(&self) -> bool {
        self.prune_depth.is_none() && self.count_cap.is_some()
    }
}

/// Compiles `schema` by the ladder (see the module docs); the restriction taken, in words.
///
/// Each attempt may use half of `max_compile_ms` of CPU time (see the module docs).
/// With `rules`, recursive references are calls of rules (the answer may be a pushdown
/// grammar, see `walk`); without, they unroll.
pub(super) fn compile(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig, rules: bool) -> Result<(Compiled, Option<String>)> {
    compile_helped_after(schema, opts, config, HELP_AFTER, rules)
}

/// [`compile`], with helpers starting once the attempts have run for `help_after`.
pub(super) fn compile_helped_after(
    schema: &Value,
    opts: &JsonSchemaOptions,
    config: &DfaConfig,
    help_after: Duration,
    rules: bool,
) -> Result<(Compiled, Option<String>)> {
    let steps = if opts.allow_restriction { RESTRICTIONS.len() } else { 1 };
    // Every attempt walks the same schema: its small automata are built once for all of them.
    let config = &config.with_memo();
    let ladder = Ladder {
        schema,
        opts,
        config,
        started: Instant::now(),
        total: Duration::from_millis(opts.max_compile_ms),
        steps,
        help_after,
        rules,
        board: Mutex::new(Board {
            taken: vec![false; steps],
            outcomes: (0..steps).map(|_| None).collect(),
            overflows: vec![None; steps],
            large_bounds: None,
            decided: false,
        }),
        cancels: (0..steps).map(|_| Arc::new(AtomicBool::new(false))).collect(),
        changed: Condvar::new(),
    };
    let helpers = opts.threads.max(1).min(steps) - 1;
    let pauses = background::pauses();
    std::thread::scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|| {
                background::inherit(pauses);
                if ladder.wait_for_help_needed() {
                    ladder.work();
                }
            });
        }
        ladder.work();
        let out = ladder.wait_for_decision().and_then(|(compiled, restriction)| match restriction {
            Some(what) if !opts.allow_restriction => Err(GrammarError::TooLarge {
                what: "JSON Schema grammar",
                limit: config.max_states,
                detail: format!("exact only was asked for (allow_restriction is off), and {what}"),
            }),
            r => Ok((compiled, r)),
        });
        // Whatever still runs is more restricted than the answer: stop it, wake idle helpers.
        ladder.cancels.iter().for_each(|c| c.store(true, Ordering::Relaxed));
        ladder.changed.notify_all();
        out
    })
}

/// What became of one attempt.
enum Outcome {
    /// Not determinized: nothing to cap or prune (the same automaton as a less restricted
    /// attempt).
    Skipped,
    /// Over the state limit or out of time: a more restricted attempt may fit.
    TooLarge(GrammarError),
    /// The automaton fits: the answer once every less restricted attempt has failed. With
    /// whether its walk met a bound the count cap lowers (for the description).
    Fit(Box<Compiled>, bool, Taken),
    /// No string at all, or an error no restriction mends: final in the same way.
    Failed(GrammarError),
}

/// The attempts' shared state.
struct Board {
    /// The attempts some thread has taken.
    taken: Vec<bool>,
    outcomes: Vec<Option<Outcome>>,
    /// Per attempt that did not fit, what its determinization showed.
    overflows: Vec<Option<Overflow>>,
    /// Whether the schema has large count bounds, once an unpruned walk has finished (a
    /// pruned walk may not reach them).
    large_bounds: Option<bool>,
    /// Set once the answer is known: threads take no more attempts.
    decided: bool,
}

impl Board {
    /// Index of the answer: the first attempt that is neither skipped nor too large, when every
    /// one before it has finished; `Some(None)` when every attempt was skipped or too large.
    fn answer(&self) -> Option<Option<usize>> {
        for (i, o) in self.outcomes.iter().enumerate() {
            match o {
                None => return None,
                Some(Outcome::Fit(..) | Outcome::Failed(_)) => return Some(Some(i)),
                Some(_) => {}
            }
        }
        Some(None)
    }

    /// The attempt a free thread takes next: the least restricted one not taken, but while
    /// no walk has told whether any bound is large, a count cap alone waits behind the prune
    /// depths (if no bound is large it is the exact attempt again, and a helper would repeat
    /// the exact walk for nothing). `None` when none is left, or none can be the answer (one
    /// less restricted has fitted or failed for good).
    fn pick(&self) -> Option<usize> {
        let settled = self.outcomes.iter().position(|o| matches!(o, Some(Outcome::Fit(..) | Outcome::Failed(_))));
        let open = |i: &usize| !self.taken[*i] && settled.is_none_or(|s| *i < s);
        let mut open_ones = (0..self.taken.len()).filter(open);
        let first = open_ones.clone().next()?;
        Some(open_ones.find(|&i| !(RESTRICTIONS[i].caps_only() && self.large_bounds.is_none())).unwrap_or(first))
    }

    /// The overflow of the most restricted failed attempt before `i`.
    fn overflow_before(&self, i: usize) -> Option<Overflow> {
        self.overflows[..i].iter().rev().find_map(|o| *o)
    }
}

struct Ladder<'a> {
    schema: &'a Value,
    opts: &'a JsonSchemaOptions,
    config: &'a DfaConfig,
    started: Instant,
    total: Duration,
    steps: usize,
    help_after: Duration,
    /// Recursive references as calls of rules.
    rules: bool,
    board: Mutex<Board>,
    /// Raised to stop attempt `i` (a less restricted one fitted).
    cancels: Vec<Arc<AtomicBool>>,
    changed: Condvar,
}

impl Ladder<'_> {
    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        // A panicking attempt poisons the lock; the scope re-raises its panic anyway.
        self.board.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// For a helper: waits until the attempts have run for `help_after`; false when the
    /// answer came first.
    fn wait_for_help_needed(&self) -> bool {
        let mut board = self.board();
        loop {
            if board.decided || board.pick().is_none() {
                return false;
            }
            let waited = self.started.elapsed();
            if waited >= self.help_after {
                return true;
            }
            board = self.changed.wait_timeout(board, self.help_after - waited).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Takes attempts in ladder order until none is left or the answer is known.
    fn work(&self) {
        loop {
            let (i, large_bounds, overflow) = {
                let mut board = self.board();
                let Some(i) = board.pick().filter(|_| !board.decided) else { return };
                board.taken[i] = true;
                (i, board.large_bounds, board.overflow_before(i))
            };
            // A panic (a bug) still settles the attempt, so no thread waits for it forever;
            // it is raised again here and re-raised by the scope.
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.attempt(i, large_bounds, overflow)));
            let (outcome, panic) = match run {
                Ok(outcome) => (outcome, None),
                Err(payload) => {
                    let e = GrammarError::InvalidSchema { path: "#".into(), reason: "the compiler panicked".into() };
                    (Outcome::Failed(e), Some(payload))
                }
            };
            let mut board = self.board();
            if let Outcome::Fit(..) | Outcome::Failed(_) = outcome {
                self.cancels[i + 1..].iter().for_each(|c| c.store(true, Ordering::Relaxed));
            }
            board.outcomes[i] = Some(outcome);
            board.decided = board.answer().is_some();
            self.changed.notify_all();
            drop(board);
            if let Some(payload) = panic {
                std::panic::resume_unwind(payload);
            }
        }
    }

    /// Waits for the answer and takes it out of the board.
    fn wait_for_decision(&self) -> Result<(Compiled, Option<String>)> {
        let mut board = self.board();
        let answer = loop {
            if let Some(answer) = board.answer() {
                break answer;
            }
            board = self.changed.wait(board).unwrap_or_else(|p| p.into_inner());
        };
        board.decided = true;
        if let Some(i) = answer {
            return match board.outcomes[i].take() {
                Some(Outcome::Fit(compiled, capped, taken)) => Ok((*compiled, RESTRICTIONS[i].describe(capped, &taken))),
                Some(Outcome::Failed(e)) => Err(e),
                _ => unreachable!("the answer is an attempt that fitted or failed for good"),
            };
        }
        let last = board.outcomes.iter_mut().rev().find_map(|o| match o.take() {
            Some(Outcome::TooLarge(e)) => Some(e),
            _ => None,
        });
        Err(last.unwrap_or_else(|| GrammarError::EmptyLanguage { detail: "no JSON value satisfies the schema".into() }))
    }

    /// Runs attempt `i`, knowing (if an earlier walk told) whether the schema has large
    /// bounds, and the overflow of the last less restricted attempt that did not fit.
    fn attempt(&self, i: usize, large_bounds: Option<bool>, overflow: Option<Overflow>) -> Outcome {
        let r = RESTRICTIONS[i];
        if r.caps_only() && large_bounds == Some(false) {
            return Outcome::Skipped;
        }
        let last_try = i + 1 == self.steps;
        let reached = Arc::new(AtomicU64::new(0));
        // Without a CPU clock, the budget is wall-clock time from now.
        let cpu = CpuDeadline::after(self.total / 2);
        let at = if cpu.is_some() { self.started + self.total * WALL_SAFETY } else { Instant::now() + self.total / 2 };
        let config = DfaConfig {
            deadline: Some(Deadline::new(at, cpu, self.opts.max_compile_ms)),
            nfa_states_factor: Some(2),
            states_reached: Some(reached.clone()),
            cancel: Some(self.cancels[i].clone()),
            ..self.config.clone()
        };
        let mut compiler = walk::Compiler::new(self.schema, self.opts, &config);
        compiler.count_cap = r.count_cap;
        compiler.prune_depth = r.prune_depth;
        if self.rules {
            compiler.rules = Some(RtnBuilder::new());
        }
        let root = compiler.root_item(self.schema);
        let expr = compiler.compile_one(root);
        // The bodies of the rules the walk called, and the grammar they make.
        let rules = match &expr {
            Ok(e) => compiler.finish_rules(e.clone()),
            Err(_) => Ok(None),
        };
        let has_large_bounds = compiler.has_large_bounds();
        // A walk cut short knows a bound is large once it met one, never that none is.
        if r.prune_depth.is_none() && (expr.is_ok() || has_large_bounds) {
            self.board().large_bounds.get_or_insert(has_large_bounds);
        }
        if r.caps_only() && !has_large_bounds {
            return Outcome::Skipped;
        }
        if r.prune_depth.is_some() && !compiler.pruned() && expr.is_ok() {
            // Nothing that deep: the same expression as the capped attempt before.
            return Outcome::Skipped;
        }
        // The NFA estimate is only needed to predict from an earlier overflow, or to record one.
        let mut memo = HashMap::new();
        let rules = match rules {
            Ok(r) => r,
            Err(e @ GrammarError::TooLarge { .. }) => return Outcome::TooLarge(e),
            Err(e) => return Outcome::Failed(e),
        };
        if let Some((builder, start)) = rules {
            // A pushdown grammar: each rule is determinized on its own.
            return match builder.build(start, "JSON Schema", &config) {
                Ok(compiled) => Outcome::Fit(Box::new(compiled), has_large_bounds, compiler.taken()),
                Err(e @ GrammarError::TooLarge { .. }) => Outcome::TooLarge(e),
                // Left to the compile without rules (see `compile_language`), which sees at each
                // value what the rules only show once built, and names an approximation it blames.
                Err(e @ GrammarError::EmptyLanguage { .. }) => Outcome::Failed(e),
                Err(e) => Outcome::Failed(e),
            };
        }
        let built = expr.and_then(|expr| {
            if let (Some(o), false) = (overflow, last_try) {
                if let Some(e) = o.predicts_overflow(expr.nfa_size_estimate(&mut memo), r.count_cap, self.config.max_states) {
                    return Err(e);
                }
            }
            reached.store(0, Ordering::Relaxed); // the walk's own small DFAs do not count
            expr.to_dfa(&config).inspect_err(|e| {
                let states = reached.load(Ordering::Relaxed);
                if matches!(e, GrammarError::TooLarge { .. }) && states > 0 {
                    let overflow = Overflow { estimate: expr.nfa_size_estimate(&mut memo), states, count_cap: r.count_cap };
                    self.board().overflows[i] = Some(overflow);
                }
            })
        });
        match built {
            Ok(Some(dfa)) => Outcome::Fit(Box::new(Compiled::Regular(dfa)), has_large_bounds, compiler.taken()),
            // Empty: a proof when no approximation removed a case's values, else the refusal
            // that names where the compiler approximated.
            Ok(None) => Outcome::Failed(compiler.emptied().unwrap_or_else(|| GrammarError::EmptyLanguage {
                detail: "no JSON value satisfies the schema (or none that this compiler can write: see docs/json-schema.md)".into(),
            })),
            Err(e @ GrammarError::TooLarge { .. }) => Outcome::TooLarge(e),
            Err(e) => Outcome::Failed(e),
        }
    }
}

/// What an attempt of the ladder that did not fit showed: its automaton expression's NFA size
/// estimate, and the states its determinization reached (the DFA's, or as far as it got).
///
/// Between prune depths under the same count cap the DFA grows about in proportion to the
/// estimate (on JSONSchemaBench's slowest schemas, DFA states / estimate stayed within a few
/// percent across the depths of one schema, and ranged from 0.36 to over 0.67 between schemas).
/// So a later attempt whose proportional size is still past the limit (with 10% slack) is not
/// determinized: it would fail the same way after spending most of the time left. A new count
/// cap can change the proportion a lot (0.52 to 0.09 on one Snowplow schema), so across caps
/// only an attempt whose estimate barely shrank (under 10%) is skipped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Overflow {
    pub(super) estimate: u64,
    pub(super) states: u64,
    pub(super) count_cap: Option<u64>,
}

impl Overflow {
    /// The size error for an attempt of NFA estimate `estimate` under `count_cap`, when it is
    /// predicted not to fit in `max_states`.
    pub(super) fn predicts_overflow(&self, estimate: u64, count_cap: Option<u64>, max_states: usize) -> Option<GrammarError> {
        let predicted = (estimate as u128 * self.states as u128 / self.estimate.max(1) as u128) as u64;
        let comparable = count_cap == self.count_cap || estimate * 10 >= self.estimate * 9;
        (comparable && predicted > max_states as u64 + max_states as u64 / 10).then(|| GrammarError::TooLarge {
            what: "regex DFA",
            limit: max_states,
            detail: format!("about {predicted} states predicted from a larger attempt (NFA estimate {estimate})"),
        })
    }
}
