//! `Grammar.validate` and `Grammar.repair` on the Python side: checked arguments in, the
//! core's answers out as two small frozen classes of plain Python values.
//!
//! The search itself is [`crate::repair`]; this file only converts. `Grammar`'s methods of the
//! same names delegate here, so each conversion sits next to the class it fills.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::errors::run;
use crate::grammar::Grammar as CoreGrammar;
use crate::repair::{EditKind, RepairOptions, RepairStatus};

/// The bytes of a `str` (as UTF-8) or `bytes` argument.
pub(super) fn text_bytes(text: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = text.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    if let Ok(b) = text.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err("text must be str or bytes"))
}

/// Runs [`crate::repair::validate`] with the GIL released.
pub(super) fn validate(py: Python<'_>, grammar: Arc<CoreGrammar>, text: Vec<u8>) -> PyResult<Validation> {
    let v = run(py, move || Ok(crate::repair::validate(grammar.dfa(), &text)))?;
    Ok(Validation { valid: v.valid, error_offset: v.error_offset })
}

/// The core's options from `Grammar.repair`'s arguments; rejects costs of 0, a negative or
/// non-finite deadline and a negative `max_cost`.
pub(super) fn options(
    max_cost: Option<i64>,
    deadline_ms: Option<f64>,
    insert_cost: u32,
    delete_cost: u32,
    substitute_cost: u32,
    max_expansions: Option<usize>,
) -> PyResult<RepairOptions> {
    if insert_cost == 0 || delete_cost == 0 || substitute_cost == 0 {
        return Err(PyValueError::new_err("edit costs must be at least 1"));
    }
    let deadline = match deadline_ms {
        Some(ms) if !(ms >= 0.0 && ms.is_finite()) => {
            return Err(PyValueError::new_err(format!("deadline_ms must be a non-negative number, got {ms}")))
        }
        Some(ms) => Some(Duration::from_secs_f64(ms / 1000.0)),
        None => None,
    };
    let max_cost = match max_cost {
        Some(c) if c < 0 => return Err(PyValueError::new_err(format!("max_cost must be >= 0, got {c}"))),
        Some(c) => Some(u32::try_from(c).unwrap_or(u32::MAX)),
        None => None,
    };
    Ok(RepairOptions { insert_cost, delete_cost, substitute_cost, max_cost, deadline, max_expansions })
}

/// Runs [`crate::repair::repair`] with the GIL released, and converts its answer.
pub(super) fn repair(
    py: Python<'_>,
    grammar: Arc<CoreGrammar>,
    text: Vec<u8>,
    opts: RepairOptions,
) -> PyResult<RepairResult> {
    let r = run(py, move || Ok(crate::repair::repair(grammar.dfa(), &text, &opts)))?;
    let status = match r.status {
        RepairStatus::Optimal => "optimal",
        RepairStatus::Anytime => "anytime",
        RepairStatus::NoRepairWithinMaxCost => "no_repair_within_max_cost",
        RepairStatus::NotFound => "not_found",
    };
    let edits = r
        .edits
        .iter()
        .map(|e| {
            let kind = match e.kind {
                EditKind::Insert => "insert",
                EditKind::Delete => "delete",
                EditKind::Substitute => "substitute",
            };
            (kind, e.offset, e.old, e.new)
        })
        .collect();
    Ok(RepairResult {
        status,
        text: r.text.map(|t| String::from_utf8_lossy(&t).into_owned()),
        cost: r.cost,
        lower_bound: r.lower_bound,
        edits,
        expansions: r.expansions,
    })
}

/// The answer of `Grammar.validate`: truthy when the text fully matches.
#[pyclass(frozen, module = "onyx._grammar")]
pub struct Validation {
    #[pyo3(get)]
    valid: bool,
    /// Byte offset where a match first becomes impossible; `None` when valid.
    #[pyo3(get)]
    error_offset: Option<usize>,
}

#[pymethods]
impl Validation {
    fn __bool__(&self) -> bool {
        self.valid
    }

    fn __repr__(&self) -> String {
        match self.error_offset {
            None => "Validation(valid=True)".into(),
            Some(o) => format!("Validation(valid=False, error_offset={o})"),
        }
    }
}

/// The answer of `Grammar.repair`.
#[pyclass(frozen, module = "onyx._grammar")]
pub struct RepairResult {
    /// "optimal", "anytime" (budget ran out: best found, within `lower_bound` of optimal),
    /// "no_repair_within_max_cost" or "not_found" (budget ran out before any repair).
    #[pyo3(get)]
    status: &'static str,
    /// The repaired text, or None when there is none.
    #[pyo3(get)]
    text: Option<String>,
    #[pyo3(get)]
    cost: Option<u32>,
    /// A proven lower bound on the optimal cost (equal to `cost` when optimal).
    #[pyo3(get)]
    lower_bound: u32,
    /// (kind, offset in the original bytes, old byte or None, new byte or None), in text order.
    #[pyo3(get)]
    edits: Vec<(&'static str, usize, Option<u8>, Option<u8>)>,
    #[pyo3(get)]
    expansions: usize,
}

#[pymethods]
impl RepairResult {
    #[getter]
    fn found(&self) -> bool {
        self.text.is_some()
    }

    fn __repr__(&self) -> String {
        let cost = self.cost.map_or("None".to_string(), |c| c.to_string());
        let text = self.text.as_ref().map_or("None".to_string(), |t| format!("{t:?}"));
        format!("RepairResult(status='{}', cost={cost}, lower_bound={}, text={text})", self.status, self.lower_bound)
    }
}
