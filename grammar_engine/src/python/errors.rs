//! The Python exception classes, and the boundary every call into the core goes through.
//!
//! One class per [`CoreError`] variant, all under `GrammarError` (a `ValueError`), so callers
//! can catch one kind or all of them. Structured fields of the error (the regex offset, the
//! schema keyword and path) become attributes of the exception. [`run`] releases the GIL for
//! the core call and turns its errors, and any panic, into these exceptions.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::GrammarError as CoreError;

pyo3::create_exception!(_grammar, GrammarError, PyValueError, "Base class of every grammar core error.");
pyo3::create_exception!(_grammar, InvalidRegexError, GrammarError, "The regex does not parse; `offset` says where.");
pyo3::create_exception!(_grammar, UnsupportedRegexError, GrammarError, "The regex uses a construct a DFA cannot express.");
pyo3::create_exception!(_grammar, GrammarTooLargeError, GrammarError, "A DFA or token index exceeds its size limit.");
pyo3::create_exception!(_grammar, EmptyLanguageError, GrammarError, "No string matches the grammar.");
pyo3::create_exception!(_grammar, NotCompletableError, GrammarError, "No token sequence of this vocabulary completes the grammar.");
pyo3::create_exception!(_grammar, UnsupportedSchemaError, GrammarError, "A JSON Schema keyword that is not supported; `keyword` names it.");
pyo3::create_exception!(_grammar, InvalidSchemaError, GrammarError, "The JSON Schema is malformed.");
pyo3::create_exception!(_grammar, VocabularyError, GrammarError, "The tokenizer cannot be read.");
pyo3::create_exception!(_grammar, TokenNotAllowedError, GrammarError, "The token is not allowed in this state.");
pyo3::create_exception!(_grammar, InvalidStateError, GrammarError, "The state does not belong to this grammar.");
pyo3::create_exception!(_grammar, InvalidStructureError, GrammarError, "The structure spec is malformed; `structure_path` says where.");
pyo3::create_exception!(_grammar, InvalidGrammarError, GrammarError, "The grammar (GBNF, Lark) is malformed; `line`, `column` and `rule` say where.");

/// The Python exception for a core error. An error located in a structure spec keeps the class
/// of the error inside it (an `InvalidRegexError` stays one) and gains `structure_path`, the JSON
/// pointer of the offending part.
pub(super) fn to_py(py: Python<'_>, e: CoreError) -> PyErr {
    let msg = e.to_string();
    let (e, structure_path) = match e {
        CoreError::InStructure { path, error } => (*error, Some(path)),
        CoreError::InvalidStructure { ref path, .. } => {
            let path = path.clone();
            (e, Some(path))
        }
        other => (other, None),
    };
    let err = match &e {
        CoreError::InvalidRegex { .. } => InvalidRegexError::new_err(msg),
        CoreError::UnsupportedRegex { .. } => UnsupportedRegexError::new_err(msg),
        CoreError::TooLarge { .. } => GrammarTooLargeError::new_err(msg),
        CoreError::EmptyLanguage { .. } => EmptyLanguageError::new_err(msg),
        CoreError::NotCompletable { .. } => NotCompletableError::new_err(msg),
        CoreError::UnsupportedSchemaKeyword { .. } => UnsupportedSchemaError::new_err(msg),
        CoreError::InvalidSchema { .. } => InvalidSchemaError::new_err(msg),
        CoreError::Vocabulary { .. } => VocabularyError::new_err(msg),
        CoreError::TokenNotAllowed { .. } => TokenNotAllowedError::new_err(msg),
        CoreError::InvalidState { .. } => InvalidStateError::new_err(msg),
        CoreError::InvalidStructure { .. } | CoreError::InStructure { .. } => InvalidStructureError::new_err(msg),
        CoreError::InvalidGrammar { .. } => InvalidGrammarError::new_err(msg),
        // A product met a rule call: an internal limit of the construction, said as such.
        CoreError::NotRegular { .. } => GrammarError::new_err(msg),
        // A special token asked for inside a JSON string: a grammar that cannot be used there.
        CoreError::NotText { .. } => GrammarError::new_err(msg),
    };
    // Structured fields for callers that want more than the message (the server's 400s).
    let value = err.value(py);
    let _ = match &e {
        CoreError::InvalidRegex { offset, .. } => value.setattr("offset", *offset),
        CoreError::UnsupportedSchemaKeyword { keyword, path, .. } => {
            value.setattr("keyword", keyword.as_str()).and_then(|_| value.setattr("path", path.as_str()))
        }
        CoreError::InvalidSchema { path, .. } => value.setattr("path", path.as_str()),
        CoreError::InvalidGrammar { line, column, rule, .. } => value
            .setattr("line", *line)
            .and_then(|_| value.setattr("column", *column))
            .and_then(|_| value.setattr("rule", rule.clone())),
        _ => Ok(()),
    };
    if let Some(path) = structure_path {
        let _ = value.setattr("structure_path", path);
    }
    err
}

/// [`run`] for a compilation: `f` runs at the compile priority (see
/// [`crate::util::background`]).
pub(super) fn run_compile<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, CoreError> + Send) -> PyResult<T> {
    run(py, move || crate::util::background::run(f))
}

/// Runs `f` with the GIL released, turning core errors and panics into Python exceptions.
pub(super) fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, CoreError> + Send) -> PyResult<T> {
    let out = py.detach(|| catch_unwind(AssertUnwindSafe(f)));
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(GrammarError::new_err(format!("internal error in the grammar core: {what}")))
        }
    }
}
