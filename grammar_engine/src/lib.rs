//! The Onyx grammar core.
//!
//! Data flow: a tokenizer becomes a [`Vocabulary`] (token id → bytes, plus a trie of the
//! tokens); a regex, or a JSON Schema through [`compile_json_schema`], becomes a [`Dfa`] over
//! bytes; a [`Grammar`] joins the two and answers, per DFA state, which tokens keep the
//! output completable (its token index), where each one leads, and how far acceptance is.
//! [`compile_structure`] compiles specs made of segments (text, regexes, schemas, special
//! tokens, free text up to a trigger) into one DFA, for tool calls and reasoning models.
//! [`repair()`] checks a finished text against a DFA and finds its cheapest edit into the
//! language. With the `python` feature, the `python` module exposes all of this as
//! `onyx._grammar`; the core itself never calls Python.
//!
//! The modules, by concept: `automata` (the DFA, its construction and algebra), `vocab`
//! (tokenizers to a vocabulary), `grammar` (a grammar and its token index), `json_schema`,
//! `structure`, `json_escape` (a language written as JSON string contents, for grammars inside
//! tool-call arguments), `repair`, and `python` (the binding). They are private; everything a Rust
//! user needs is re-exported here.

pub(crate) mod automata;
pub(crate) mod error;
pub(crate) mod gbnf;
pub(crate) mod grammar;
pub(crate) mod json_escape;
pub(crate) mod json_schema;
pub(crate) mod lark;
pub(crate) mod pushdown;
pub(crate) mod repair;
pub(crate) mod structure;
pub(crate) mod util;
pub(crate) mod vocab;

#[cfg(feature = "python")]
mod python;

pub use automata::{thread_cpu_time, CpuDeadline, Deadline, Dfa, DfaConfig, Expr, RegexMemo};
pub use error::{GrammarError, Result};
pub use grammar::{Bitmask, Grammar, GrammarConfig, Row, DEFAULT_MAX_INDEX_BYTES};
pub use json_escape::json_escape_bytes;
pub use json_schema::{compile as compile_json_schema, compile_noting as compile_json_schema_noting, JsonSchemaOptions};
pub use repair::{
    repair, validate, CostModel, Edit, EditKind, IntentWeights, RepairOptions, RepairResult, RepairStatus, Validation,
};
pub use structure::{compile as compile_structure, SpecialToken, SpecialTokens, Structure, MARKER_BYTES};
pub use vocab::gguf::{read_metadata as read_gguf_metadata, tokenizer_from_metadata as gguf_tokenizer, GgufValue};
pub use vocab::tokenizer_json::{eos_from_sidecars, parse as parse_tokenizer_json, resolve_eos, ParsedTokenizer};
pub use pushdown::{Pda, RtnBuilder};
pub use util::{background, RuleId, StateId, TokenId};
pub use vocab::{Family, TokenSpec, Vocabulary, END_TOKEN_NAMES};
