//! The Onyx grammar core.
//!
//! Data flow: a tokenizer becomes a [`vocab::Vocabulary`] (token id → bytes, plus a trie of the
//! tokens); a regex, or a JSON Schema through [`json_schema`], becomes a [`dfa::Dfa`] over
//! bytes; a [`grammar::Grammar`] joins the two and answers, per DFA state, which tokens keep
//! the output completable ([`index`]), where each one leads, and how far acceptance is.
//! [`structure`] compiles specs made of segments (text, regexes, schemas, special tokens, free
//! text up to a trigger) into one DFA, for tool calls and reasoning models. [`repair`] checks a
//! finished text against a DFA and finds its cheapest edit into the language. With the
//! `python` feature, the `python` module exposes all of this as `onyx._grammar`; the core
//! itself never calls Python.

pub mod algebra;
pub mod byte_level;
pub mod dfa;
pub mod error;
pub mod gguf;
mod glued_nfa;
pub mod grammar;
pub mod index;
pub mod int_hash;
pub mod json_schema;
pub mod regex_memo;
pub mod repair;
pub mod structure;
mod subset;
pub mod token_trie;
pub mod tokenizer_json;
pub mod vocab;

#[cfg(feature = "python")]
mod python;

pub use error::{GrammarError, Result};
pub use grammar::{Grammar, GrammarConfig};
pub use vocab::Vocabulary;
