//! The PyO3 module `onyx._grammar`: a thin layer over the Rust core.
//!
//! Each method converts arguments, releases the GIL for heavy work, calls the core, and maps
//! [`GrammarError`](crate::GrammarError) variants onto Python exception classes (all
//! subclasses of `GrammarError`, itself a `ValueError`). Panics are caught at this boundary
//! and raised as `GrammarError` rather than crossing into Python. Nothing here calls into the
//! `onyx` package: what needs Python code (the tokenizer self-test) runs in `onyx/`, around
//! these classes.
//!
//! * `errors`: the exception classes, and the boundary that runs core calls;
//! * `vocabulary`: `Vocabulary`, built from a tokenizer, and the grammars it compiles
//!   (regexes, JSON Schemas, structures);
//! * `grammar`: `Grammar`, the per-token step API;
//! * `repair`: `Grammar.validate` / `Grammar.repair` and their result classes;
//! * `gguf`: `read_gguf_metadata`;
//! * here: `set_compile_nice`, the priority compilations run at, and `hold_compiles` /
//!   `release_compiles` / `compiles_running`, with which a decoder keeps compilations off the
//!   cores during its steps.

mod errors;
mod gguf;
mod grammar;
mod repair;
mod vocabulary;

use pyo3::prelude::*;

use errors::{
    EmptyLanguageError, GrammarError, GrammarTooLargeError, InvalidRegexError, InvalidSchemaError, InvalidStateError,
    InvalidGrammarError, InvalidStructureError, NotCompletableError, TokenNotAllowedError, UnsupportedRegexError,
    UnsupportedSchemaError, VocabularyError,
};
use grammar::Grammar;
use repair::{RepairResult, Validation};
use vocabulary::Vocabulary;

/// Sets the nice value (0 to 19, clamped) that grammar compilations and eager index builds
/// run at from now on, so that they yield the cores to decoding; 0 (the default) runs them on
/// the calling thread at its priority. Linux only; elsewhere compilations keep the caller's
/// priority. The first lowered compilation fixes the value for the process.
#[pyfunction]
fn set_compile_nice(nice: i32) {
    crate::util::background::set_nice(nice);
}

/// Holds compilations running on the lowered-priority pool (see `set_compile_nice`): each
/// pauses at its next pause point until every hold is released (at most a second at a time).
/// Counted: each call needs one `release_compiles`. Compilations on the caller's thread (nice
/// 0) and rows built while decoding never pause.
#[pyfunction]
fn hold_compiles() {
    crate::util::background::hold();
}

/// Ends one `hold_compiles` (a release without a hold does nothing).
#[pyfunction]
fn release_compiles() {
    crate::util::background::release();
}

/// How many compilations are running on the lowered-priority pool now.
#[pyfunction]
fn compiles_running() -> usize {
    crate::util::background::running()
}

#[pymodule]
fn _grammar(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Vocabulary>()?;
    m.add_class::<Grammar>()?;
    m.add_class::<Validation>()?;
    m.add_class::<RepairResult>()?;
    m.add_function(wrap_pyfunction!(gguf::read_gguf_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(set_compile_nice, m)?)?;
    m.add_function(wrap_pyfunction!(hold_compiles, m)?)?;
    m.add_function(wrap_pyfunction!(release_compiles, m)?)?;
    m.add_function(wrap_pyfunction!(compiles_running, m)?)?;
    m.add("GrammarError", py.get_type::<GrammarError>())?;
    m.add("InvalidRegexError", py.get_type::<InvalidRegexError>())?;
    m.add("UnsupportedRegexError", py.get_type::<UnsupportedRegexError>())?;
    m.add("GrammarTooLargeError", py.get_type::<GrammarTooLargeError>())?;
    m.add("EmptyLanguageError", py.get_type::<EmptyLanguageError>())?;
    m.add("NotCompletableError", py.get_type::<NotCompletableError>())?;
    m.add("UnsupportedSchemaError", py.get_type::<UnsupportedSchemaError>())?;
    m.add("InvalidSchemaError", py.get_type::<InvalidSchemaError>())?;
    m.add("VocabularyError", py.get_type::<VocabularyError>())?;
    m.add("TokenNotAllowedError", py.get_type::<TokenNotAllowedError>())?;
    m.add("InvalidStateError", py.get_type::<InvalidStateError>())?;
    m.add("InvalidStructureError", py.get_type::<InvalidStructureError>())?;
    m.add("InvalidGrammarError", py.get_type::<InvalidGrammarError>())?;
    Ok(())
}
