//! JSON Schema → a grammar whose language is a set of JSON texts the schema allows: one DFA,
//! or rules that call each other (a pushdown grammar, see [`crate::pushdown`]).
//!
//! Every text the grammar accepts parses as JSON and validates against the schema (with
//! format checking on). The converse holds up to the documented restrictions: member names are
//! written in canonical spelling (as `json.dumps(..., ensure_ascii=False)` writes them), string
//! values in every spelling, numbers within the universe of `numbers/universe.rs` (integers of
//! any length, decimals and exponent forms within windows), compactly or with the configured
//! whitespace; object members in declaration order. Compiled as rules ([`compile_language`]), a
//! `$ref` is a call of its target's rule, so recursive schemas and values the schema leaves
//! unconstrained nest without a depth limit; where a recursive part meets an operation only
//! regular languages allow, or through [`compile`] (one DFA), values the schema leaves
//! unconstrained nest at most [`JsonSchemaOptions::max_any_depth`] levels and recursive
//! references unroll
//! [`JsonSchemaOptions::max_recursion_depth`] levels. What cannot be done exactly or by a sound
//! restriction is a typed error naming the keyword and the JSON pointer, never a silent
//! relaxation.
//!
//! How: the schema is compiled to an automaton expression ([`crate::automata::Expr`]): regexes
//! for the pieces, concatenation, union and repetition for the structure, and intersection and
//! difference where the schema combines constraints (`allOf`, a pattern with length bounds,
//! `oneOf`, `not`, `if`). The whole is one minimized DFA.
//!
//! Files, one concept each:
//! - `policy.rs`: which keywords constrain values (the rest are annotations), the dialect;
//! - `refs.rs`: `$ref` resolution (`$id`, anchors, JSON pointers);
//! - `ladder.rs`: the exact attempt, then sound restrictions, side by side on slow schemas;
//! - `walk.rs`: the compiler walk over conjunctions of schemas, under/over, emitting per type;
//! - `split.rs`: the disjunctions a conjunction splits on (`anyOf`, `oneOf`, `not`, `if`);
//! - `objects.rs`, `arrays.rs`, `strings.rs`, `numbers/`: the languages of each type;
//!   `object_over.rs`: the over-language of objects;
//!   `numbers/mod.rs` lists its own files;
//! - `pattern.rs`: the ECMA-262 `pattern` parser; `search.rs`: a pattern's search language;
//!   `formats.rs`: the `format` names; `canonical.rs`: the canonical spelling of strings (how
//!   string languages are built, and how member names are written); `respell.rs`: every
//!   spelling of string values (escapes);
//! - `values.rs`: JSON values (kinds, equality, literals, any value);
//! - `disjoint.rs`: the cheap proof that `oneOf` branches cannot overlap;
//! - `context.rs`: where the walk is (JSON pointer, depth, dialect), for errors.
//!
//! The compiler as a whole is tested through the crate's face (`tests/json_schema.rs`); the
//! tests beside the files here reach their internals.

use serde_json::Value;

use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::pushdown::Compiled;

mod apart;
mod arrays;
mod canonical;
mod context;
mod counted;
mod disjoint;
mod formats;
mod ladder;
mod numbers;
mod object_over;
mod objects;
mod pattern;
mod policy;
mod refs;
mod respell;
mod search;
mod split;
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
    /// `{"type":"object"}` with no properties, `{"type":"array"}` with no items) in a single
    /// DFA; compiled as rules they nest without a limit. Default 3.
    pub max_any_depth: usize,
    /// How many times one `$ref` target may be entered along a path in a single DFA (recursive
    /// schemas are unrolled this deep; the deepest level keeps only the non-recursive
    /// alternatives); compiled as rules, a reference is a call and recursion has no limit.
    pub max_recursion_depth: u32,
    /// Compile time limit, in milliseconds of CPU time: each attempt of the restriction ladder
    /// may use half of it on its own thread (past it: a typed `TooLarge` error, or the next
    /// restriction). Counting CPU rather than wall-clock time makes the outcome the same on a
    /// busy machine.
    pub max_compile_ms: u64,
    /// Whether a schema whose exact automaton is over a limit may be compiled under a sound
    /// restriction (`RESTRICTIONS` in `ladder.rs`); when false it is a typed `TooLarge` error.
    /// Default true.
    pub allow_restriction: bool,
    /// Most attempts of the restriction ladder run at once (threads, the caller's included);
    /// 1 = one after another. Default: the machine's cores, at most 4.
    pub threads: usize,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            max_whitespace: 0,
            max_any_depth: 3,
            max_recursion_depth: 3,
            max_compile_ms: 5_000,
            allow_restriction: true,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        }
    }
}

/// Compiles `schema` into a DFA over UTF-8 bytes whose full matches are JSON texts valid under
/// the schema.
///
/// Each attempt, the exact one and each restricted retry, may use half of `max_compile_ms` of
/// CPU time.
/// An attempt whose automaton expression is far past the state limit gives up before
/// determinizing (see `Expr::to_dfa`), one predicted from an attempt that
/// did not fit to be over the limit too is skipped, and slow attempts get the next ones
/// started beside them (`ladder.rs`), so hopeless attempts cost little.
pub fn compile(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig) -> Result<Dfa> {
    compile_noting(schema, opts, config).map(|(dfa, _)| dfa)
}

/// [`compile`], and which restriction it took (`None`: the exact language, up to the
/// documented output form), in words.
pub fn compile_noting(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig) -> Result<(Dfa, Option<String>)> {
    match ladder::compile(schema, opts, config, false)? {
        (Compiled::Regular(dfa), restriction) => Ok((dfa, restriction)),
        (Compiled::Pushdown(_), _) => Err(GrammarError::NotRegular { detail: "a schema compiled without rules".into() }),
    }
}

/// The language of `schema` as a grammar: one DFA when it is regular, a pushdown grammar (rules
/// that call each other) when a recursive reference makes it nest without a depth limit. When a
/// recursive part meets an operation only regular languages allow (the difference that keeps
/// `oneOf` branches apart, `not`, ...), the schema is compiled as [`compile`] does, its
/// recursion unrolled. So is a schema whose rules leave the start with no string: an untyped
/// schema whose required member no value satisfies is written as another type only where the
/// walk sees that the member is empty, and a rule's body is only known after the walk.
pub fn compile_language(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig) -> Result<(Compiled, Option<String>)> {
    match ladder::compile(schema, opts, config, true) {
        Err(GrammarError::NotRegular { .. } | GrammarError::EmptyLanguage { .. }) => ladder::compile(schema, opts, config, false),
        other => other,
    }
}
