//! Structures: constraints made of segments (text, regexes, JSON Schemas, grammars, special
//! tokens, free text up to a trigger), compiled to ONE DFA, or to a pushdown grammar when an
//! embedded grammar (GBNF, Lark) recurses.
//!
//! Tool calls and reasoning models need a constraint that is free in one place and strict in
//! another: "any text, or a `<tool_call>` followed by a valid call", "any thinking, then
//! `</think>`, then JSON for this schema". Free text that does not contain a trigger is a
//! regular language (the complement of `Σ*·T·Σ*`), so the whole is still regular: one DFA with
//! lookup masks, forced spans for jump-forward, and budget-aware masking that sees across
//! segments (a call that has begun can always close within the budget).
//!
//! A spec is JSON (docs/architecture.md, "Structures", shows it in use):
//!
//! | spec | matches |
//! |---|---|
//! | `"abc"` or `{"text": "abc"}` | exactly that text |
//! | `{"regex": "[0-9]+"}` | full matches of the regex |
//! | `{"json_schema": {...}, "max_whitespace": 0}` | JSON valid under the schema |
//! | `{"gbnf": "root ::= ..."}` / `{"lark": "start: ..."}` | the grammar's strings |
//! | `{"token": "[TOOL_CALLS]"}` or `{"token": 5}` | that token (see below) |
//! | `{"free_text": true}` / `{"free_text": {"without": ["</think>"]}}` | any text not containing a stop |
//! | `{"until": "</think>"}` (or a list of stops) | free text without the stop(s), then a stop |
//! | `[a, b]` or `{"sequence": [a, b]}` | a then b |
//! | `{"any_of": [a, b]}` | a or b |
//! | `{"repeat": a, "min": 1, "max": 3, "separator": ","}` | 1 to 3 a's, comma-separated |
//! | `{"optional": a}` | a or nothing |
//! | `{"json_string": a}` | a's strings as JSON strings: `"`, the string escaped, `"` |
//!
//! A `token` that the vocabulary marks special is that one token id, at that point only (see
//! [`special`]); a token that is ordinary text in this vocabulary (Qwen2's `<tool_call>`) stands
//! for its text, written by any tokens. Free text is valid UTF-8 and never holds a special
//! token. A `json_string` writes each string of its node as serde_json would (`\"`, `\\`,
//! `\n`, `\u001b`, ...; see [`crate::json_escape`]), so a grammar's sentence can be a JSON
//! value (a custom tool's input inside a call's arguments); its node cannot name a special
//! token. Errors are [`GrammarError::InvalidStructure`] for the spec's shape and
//! [`GrammarError::InStructure`] around a part's own error, both with the JSON pointer of the
//! offending node.
//!
//! Files: `spec.rs` reads the JSON, `build.rs` compiles nodes to automaton expressions,
//! `special.rs` gives special tokens their marker bytes.

mod build;
mod spec;
pub(crate) mod special;

use serde_json::Value;

use crate::automata::{DfaConfig, Expr};
use crate::error::{GrammarError, Result};
use crate::json_schema::JsonSchemaOptions;
use crate::pushdown::RtnBuilder;
use crate::util::RuleId;
use crate::vocab::Vocabulary;

pub use special::{SpecialToken, SpecialTokens, MARKER_BYTES};

/// A compiled structure: its rules (the start rule is the structure; embedded grammars add
/// theirs), and the special tokens it names (read as marker bytes).
#[derive(Debug)]
pub struct Structure {
    pub rules: RtnBuilder,
    pub start: RuleId,
    pub specials: SpecialTokens,
}

/// Compiles `spec` for `vocab`. `schema` gives the JSON Schema options of `json_schema` nodes
/// that set none of their own.
pub fn compile(spec: &Value, vocab: &Vocabulary, schema: &JsonSchemaOptions, config: &DfaConfig) -> Result<Structure> {
    let root = spec::parse(spec)?;
    let mut builder = build::Builder::new(vocab, schema, config);
    let expr = builder.expr(&root)?;
    if matches!(expr, Expr::Empty) {
        return Err(GrammarError::EmptyLanguage {
            detail: "no string matches the structure (an empty free text, a contradictory schema, ...)".into(),
        });
    }
    let mut rules = builder.rules;
    let start = rules.declare("structure");
    rules.define(start, expr);
    Ok(Structure { rules, start, specials: builder.specials })
}
