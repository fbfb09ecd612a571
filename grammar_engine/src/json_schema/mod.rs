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
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions { max_whitespace: 0, max_any_depth: 3, max_recursion_depth: 3, max_compile_ms: 5_000 }
    }
}

/// Upper bounds tried, in turn, when the exact automaton is over the size limit: large
/// `maxItems`/`maxLength` bounds multiply states (100 items of strings up to 1024 characters
/// need 100 × 1024 of them). Keeping fewer elements or shorter strings than a maximum allows
/// is a sound restriction, taken only when the exact automaton does not fit.
const COUNT_CAPS: [Option<u64>; 3] = [None, Some(16), Some(4)];

/// Compiles `schema` into a DFA over UTF-8 bytes whose full matches are JSON texts valid under
/// the schema.
///
/// The whole compilation, retries with count caps included, has `max_compile_ms`: the exact
/// attempt may use half of it (a fifth for its final automaton when a cap could still make it
/// smaller: an automaton that large is past the size limit more often than not, and the retry
/// needs the time), the first capped one three quarters, the last one all of it.
pub fn compile(schema: &Value, opts: &JsonSchemaOptions, config: &DfaConfig) -> Result<Dfa> {
    let mut last = None;
    let started = std::time::Instant::now();
    let by = |twentieths: u64| DfaConfig {
        deadline: Some(Deadline {
            at: started + std::time::Duration::from_millis(opts.max_compile_ms * twentieths / 20),
            limit_ms: opts.max_compile_ms,
        }),
        ..config.clone()
    };
    for (attempt, cap) in COUNT_CAPS.into_iter().enumerate() {
        let walk_config = by([10, 15, 20][attempt]);
        let mut compiler = walk::Compiler::new(schema, opts, &walk_config);
        compiler.count_cap = cap;
        let root = compiler.root_item(schema);
        let attempt = compiler.compile_one(root).and_then(|expr| {
            let final_config = if cap.is_none() && compiler.capped() { by(4) } else { walk_config.clone() };
            expr.to_dfa(&final_config)
        });
        match attempt {
            Ok(Some(dfa)) => return Ok(dfa),
            Ok(None) => {
                return Err(GrammarError::EmptyLanguage {
                    detail: "no JSON value satisfies the schema (or none that this compiler can write: see the JSON Schema notes in the README)".into(),
                })
            }
            Err(e @ GrammarError::TooLarge { .. }) if compiler.capped() => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| GrammarError::EmptyLanguage { detail: "no JSON value satisfies the schema".into() }))
}
