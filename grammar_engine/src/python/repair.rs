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
use crate::repair::{CostModel, EditKind, IntentWeights, RepairOptions, RepairStatus};

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
    let v = run(py, move || Ok(grammar.check_text(&text)))?;
    Ok(Validation { valid: v.is_ok(), error_offset: v.err() })
}

/// The names of the intent model's weights, as `Grammar.repair(weights=...)` takes them.
const WEIGHT_NAMES: [&str; 15] = [
    "delete_before",
    "delete_after",
    "delete_structure",
    "delete_space",
    "delete_string",
    "insert_punct",
    "insert_quote",
    "insert_escape",
    "insert_other",
    "substitute",
    "substitute_string",
    "substitute_quote",
    "substitute_near",
    "keep_quote",
    "keep_outside",
];

fn weight_slots(w: &mut IntentWeights) -> [&mut u32; 15] {
    [
        &mut w.delete_before,
        &mut w.delete_after,
        &mut w.delete_structure,
        &mut w.delete_space,
        &mut w.delete_string,
        &mut w.insert_punct,
        &mut w.insert_quote,
        &mut w.insert_escape,
        &mut w.insert_other,
        &mut w.substitute,
        &mut w.substitute_string,
        &mut w.substitute_quote,
        &mut w.substitute_near,
        &mut w.keep_quote,
        &mut w.keep_outside,
    ]
}

/// The frozen default weights of the intent model, by name.
pub(super) fn default_weights() -> Vec<(&'static str, u32)> {
    let mut w = IntentWeights::DEFAULT;
    WEIGHT_NAMES.iter().copied().zip(weight_slots(&mut w).map(|v| *v)).collect()
}

/// The intent model's weights: the defaults, with the named ones replaced.
fn intent_weights(overrides: &[(String, u32)]) -> PyResult<IntentWeights> {
    let mut w = IntentWeights::DEFAULT;
    for (name, value) in overrides {
        let Some(k) = WEIGHT_NAMES.iter().position(|n| n == name) else {
            return Err(PyValueError::new_err(format!(
                "unknown repair weight {name:?}; the weights are {}",
                WEIGHT_NAMES.join(", ")
            )));
        };
        *weight_slots(&mut w)[k] = *value;
    }
    if weight_slots(&mut w).iter().take(13).any(|v| **v == 0) {
        return Err(PyValueError::new_err("edit weights must be at least 1 (keep_quote and keep_outside may be 0)"));
    }
    Ok(w)
}

/// The core's options from `Grammar.repair`'s arguments. Any of the three edit costs selects
/// plain edit distance (the others default to 1); otherwise the intent model, with `weights`
/// overriding its defaults. Rejects costs of 0, a negative or non-finite deadline and a
/// negative `max_cost`.
#[allow(clippy::too_many_arguments)]
pub(super) fn options(
    max_cost: Option<i64>,
    deadline_ms: Option<f64>,
    insert_cost: Option<u32>,
    delete_cost: Option<u32>,
    substitute_cost: Option<u32>,
    max_expansions: Option<usize>,
    weights: Option<Vec<(String, u32)>>,
) -> PyResult<RepairOptions> {
    let edit = insert_cost.is_some() || delete_cost.is_some() || substitute_cost.is_some();
    if edit && weights.is_some() {
        return Err(PyValueError::new_err("give either edit costs or weights, not both"));
    }
    let (insert_cost, delete_cost, substitute_cost) =
        (insert_cost.unwrap_or(1), delete_cost.unwrap_or(1), substitute_cost.unwrap_or(1));
    if insert_cost == 0 || delete_cost == 0 || substitute_cost == 0 {
        return Err(PyValueError::new_err("edit costs must be at least 1"));
    }
    let model = if edit { CostModel::Edit } else { CostModel::Intent(intent_weights(&weights.unwrap_or_default())?) };
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
    Ok(RepairOptions { model, insert_cost, delete_cost, substitute_cost, max_cost, deadline, max_expansions })
}

/// Runs [`crate::repair::repair`] with the GIL released, and converts its answer.
pub(super) fn repair(
    py: Python<'_>,
    grammar: Arc<CoreGrammar>,
    text: Vec<u8>,
    opts: RepairOptions,
) -> PyResult<RepairResult> {
    let r = run(py, move || {
        // The search walks one DFA's states; a pushdown grammar's are readings with stacks. A
        // text the grammar accepts needs no search; another is repaired into the grammar's
        // regular form (see `Grammar::regular_dfa`): a subset, so the answer is checked here,
        // and it may not be the cheapest (at least one edit is all that is proven).
        if !grammar.is_pushdown() {
            return Ok(crate::repair::repair(grammar.dfa(), &text, &opts));
        }
        if grammar.check_text(&text).is_ok() {
            return Ok(crate::repair::unchanged(&text));
        }
        let mut r = crate::repair::repair(grammar.regular_dfa()?, &text, &opts);
        if r.text.as_deref().is_some_and(|t| grammar.check_text(t).is_err()) {
            r.text = None;
            r.cost = None;
            r.edits.clear();
            r.status = RepairStatus::NotFound;
        }
        if r.status == RepairStatus::Optimal {
            r.status = RepairStatus::Anytime;
        }
        r.lower_bound = r.lower_bound.min(1);
        Ok(r)
    })?;
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
