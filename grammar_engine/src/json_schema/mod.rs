//! JSON Schema → one DFA whose language is a set of JSON texts the schema allows.
//!
//! Every text the grammar accepts parses as JSON and validates against the schema (with
//! format checking on). The converse holds up to the documented restrictions: values are
//! written in canonical spelling (strings as `json.dumps(..., ensure_ascii=False)` writes them,
//! numbers without exponent), compactly or with the configured whitespace; object members in
//! declaration order; values the schema leaves unconstrained nest at most
//! [`JsonSchemaOptions::max_any_depth`] levels; recursive references unroll
//! [`JsonSchemaOptions::max_recursion_depth`] levels. What cannot be done exactly or by a sound
//! restriction is a typed error naming the keyword and the JSON pointer, never a silent
//! relaxation.
//!
//! How: the schema is compiled to an automaton expression ([`crate::algebra::Expr`]): regexes
//! for the pieces, concatenation, union and repetition for the structure, and intersection and
//! difference where the schema combines constraints (`allOf`, a pattern with length bounds,
//! `oneOf`, `not`, `if`). The whole is one minimized DFA.
//!
//! Files, one concept each:
//! - `policy.rs`: which keywords constrain values (the rest are annotations), the dialect;
//! - `refs.rs`: `$ref` resolution (`$id`, anchors, JSON pointers);
//! - `walk.rs`: the compiler walk over conjunctions of schemas, combinators, under/over;
//! - `objects.rs`, `arrays.rs`, `strings.rs` (+ `pattern.rs`, `formats.rs`), `numbers.rs`: the
//!   languages of each type;
//! - `values.rs`: JSON values (kinds, equality, literals, any value);
//! - `disjoint.rs`: the cheap proof that `oneOf` branches cannot overlap;
//! - `context.rs`: where the walk is (JSON pointer, depth, dialect), for errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::dfa::{Deadline, Dfa, DfaConfig};
use crate::error::{GrammarError, Result};

mod arrays;
mod canonical;
mod context;
mod disjoint;
mod formats;
mod numbers;
mod objects;
mod pattern;
mod policy;
mod refs;
mod search;
mod strings;
mod values;
mod walk;

#[cfg(test)]
mod tests;

/// Options for compiling JSON Schema.
#[derive(Debug, Clone)]
pub struct JsonSchemaOptions {
    /// Most whitespace characters allowed at each place JSON allows whitespace (between tokens:
    /// after `{` `[` `,` `:` and before `}` `]` `,` `:`). 0 = compact output (the default): no
    /// whitespace at all. N>0: `[ \t\n\r]{0,N}`.
    pub max_whitespace: usize,
    /// Nesting depth allowed for values the schema leaves unconstrained (`{}`, `true`,
    /// `{"type":"object"}` with no properties, `{"type":"array"}` with no items). Default 3.
    pub max_any_depth: usize,
    /// How many times one `$ref` target may be entered along a path (recursive schemas are
    /// unrolled this deep; the deepest level keeps only the non-recursive alternatives).
    pub max_recursion_depth: u32,
    /// Compile time limit, in milliseconds (past it: a typed `TooLarge` error).
    pub max_compile_ms: u64,
    /// Whether a schema whose exact automaton is over a limit may be compiled under a sound
    /// restriction ([`RESTRICTIONS`]); when false it is a typed `TooLarge` error. Default true.
    pub allow_restriction: bool,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions { max_whitespace: 0, max_any_depth: 3, max_recursion_depth: 3, max_compile_ms: 5_000, allow_restriction: true }
    }
}

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
/// Each keeps fewer texts than the schema allows, never an invalid one, and is taken only when
/// the less restricted attempts did not fit. A cap is tried only when some bound is large; a
/// prune depth that leaves nothing out is not determinized again.
const RESTRICTIONS: [Restriction; 8] = [
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
struct Restriction {
    count_cap: Option<u64>,
    prune_depth: Option<usize>,
}

impl Restriction {
    /// What the restriction leaves out, in words; `None` for the exact attempt.
    fn describe(&self, had_large_bounds: bool) -> Option<String> {
        let cap = self.count_cap.filter(|_| had_large_bounds).map(|c| format!("maxItems and maxLength above {c} lowered to {c}"));
        let prune = self.prune_depth.map(|d| {
            format!("objects {d} or more levels deep keep only required members, arrays that deep only minItems elements")
        });
        let parts: Vec<String> = cap.into_iter().chain(prune).collect();
        (!parts.is_empty()).then(|| format!("the exact grammar is too large: {}", parts.join("; ")))
    }
}

/// Compiles `schema` into a DFA over UTF-8 bytes whose full matches are JSON texts valid under
/// the schema.
///
/// The whole compilation, restricted retries included, has `max_compile_ms`: the exact
/// attempt may use half of it, each later one half of what is left, the last one all of it.
/// An attempt whose automaton expression is far past the state limit gives up before
/// determinizing (see [`crate::algebra::Expr::to_dfa`]), and one predicted from an attempt
/// that did not fit to be over the limit too is skipped ([`Overflow`]), so hopeless attempts
/// cost little.
pub fn compile(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig) -> Result<Dfa> {
    compile_noting(schema, opts, config).map(|(dfa, _)| dfa)
}

/// [`compile`], and which restriction it took (`None`: the exact language, up to the
/// documented output form), in words.
pub fn compile_noting(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig) -> Result<(Dfa, Option<String>)> {
    let mut last = None;
    let started = std::time::Instant::now();
    let total = std::time::Duration::from_millis(opts.max_compile_ms);
    let mut large_bounds = true;
    let mut overflow: Option<Overflow> = None;
    let steps = if opts.allow_restriction { RESTRICTIONS.len() } else { 1 };
    for (i, r) in RESTRICTIONS.into_iter().take(steps).enumerate() {
        if r.prune_depth.is_none() && r.count_cap.is_some() && !large_bounds {
            continue;
        }
        let last_try = i + 1 == steps;
        let now = std::time::Instant::now();
        let left = total.saturating_sub(now - started);
        let reached = Arc::new(AtomicU64::new(0));
        let walk_config = DfaConfig {
            deadline: Some(Deadline { at: if last_try { started + total } else { now + left / 2 }, limit_ms: opts.max_compile_ms }),
            nfa_states_factor: Some(2),
            states_reached: Some(reached.clone()),
            ..config.clone()
        };
        let mut compiler = walk::Compiler::new(schema, opts, &walk_config);
        compiler.count_cap = r.count_cap;
        compiler.prune_depth = r.prune_depth;
        let root = compiler.root_item(schema);
        let expr = compiler.compile_one(root);
        if i == 0 {
            large_bounds = compiler.capped();
        }
        if r.prune_depth.is_some() && !compiler.pruned() && expr.is_ok() {
            // Nothing that deep: the same expression as the capped attempt before.
            continue;
        }
        // The NFA estimate is only needed to predict from an earlier overflow, or to record one.
        let mut memo = HashMap::new();
        let outcome = expr.and_then(|expr| {
            if let (Some(o), false) = (overflow, last_try) {
                if let Some(e) = o.predicts_overflow(expr.nfa_size_estimate(&mut memo), r.count_cap, config.max_states) {
                    return Err(e);
                }
            }
            reached.store(0, Ordering::Relaxed); // the walk's own small DFAs do not count
            expr.to_dfa(&walk_config).inspect_err(|e| {
                let states = reached.load(Ordering::Relaxed);
                if matches!(e, GrammarError::TooLarge { .. }) && states > 0 {
                    overflow = Some(Overflow { estimate: expr.nfa_size_estimate(&mut memo), states, count_cap: r.count_cap });
                }
            })
        });
        match outcome {
            Ok(Some(dfa)) => return Ok((dfa, r.describe(large_bounds))),
            Ok(None) => {
                return Err(GrammarError::EmptyLanguage {
                    detail: "no JSON value satisfies the schema (or none that this compiler can write: see the JSON Schema notes in the README)".into(),
                })
            }
            Err(e @ GrammarError::TooLarge { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
        if std::time::Instant::now() >= started + total {
            break;
        }
    }
    Err(last.unwrap_or_else(|| GrammarError::EmptyLanguage { detail: "no JSON value satisfies the schema".into() }))
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
struct Overflow {
    estimate: u64,
    states: u64,
    count_cap: Option<u64>,
}

impl Overflow {
    /// The size error for an attempt of NFA estimate `estimate` under `count_cap`, when it is
    /// predicted not to fit in `max_states`.
    fn predicts_overflow(&self, estimate: u64, count_cap: Option<u64>, max_states: usize) -> Option<GrammarError> {
        let predicted = (estimate as u128 * self.states as u128 / self.estimate.max(1) as u128) as u64;
        let comparable = count_cap == self.count_cap || estimate * 10 >= self.estimate * 9;
        (comparable && predicted > max_states as u64 + max_states as u64 / 10).then(|| GrammarError::TooLarge {
            what: "regex DFA",
            limit: max_states,
            detail: format!("about {predicted} states predicted from a larger attempt (NFA estimate {estimate})"),
        })
    }
}
