//! `Grammar`: the step API the decoding loop calls once per token.
//!
//! Masks are handed to Python as read-only NumPy views of the core's own masks, made once per
//! mask and shared by every caller, so asking for a mask never copies it (a pushdown grammar's
//! states that allow the same tokens share one mask: `mask_id`). A regular grammar's view owns
//! a share of its row, so it stays valid when the index drops the row to stay within its
//! budget; views of dropped rows are let go when the index has dropped rows since the last
//! look. State and token ids
//! arrive as Python ints and are checked here: a state that is not the grammar's (negative,
//! past `u32` or past the last state) raises `InvalidStateError`, a token outside the
//! vocabulary `TokenNotAllowedError`, never a panic.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::errors::{run, run_compile, to_py};
use super::repair::{self, RepairResult, Validation};
use crate::error::GrammarError as CoreError;
use crate::grammar::{Bitmask, Grammar as CoreGrammar, Row, OUTSIDE_VOCABULARY};
use crate::util::{StateId, TokenId};

/// A compiled grammar: the step API the decoding loop calls once per token.
#[pyclass(frozen, module = "onyx._grammar")]
pub struct Grammar {
    inner: Arc<CoreGrammar>,
    /// One read-only NumPy view per mask, made on first request and handed out again after
    /// that, so `token_bitmask` never copies: by state for a regular grammar (with the row it
    /// shows, to tell whether the index still holds that row), by mask id for a pushdown one
    /// (whose states are met as text is read).
    views: Mutex<HashMap<u32, (usize, Py<PyArray1<u32>>)>>,
    /// The core's `rows_dropped` when `views` was last pruned.
    pruned_at: AtomicUsize,
    pushdown_views: Mutex<HashMap<u32, Py<PyArray1<u32>>>>,
}

/// The owner of a regular grammar's row while NumPy views of its mask exist (their base object).
#[pyclass(frozen, module = "onyx._grammar")]
struct RowOwner {
    row: Arc<Row>,
}

impl Grammar {
    pub(super) fn wrap(g: CoreGrammar) -> Self {
        Grammar { inner: Arc::new(g), views: Mutex::new(HashMap::new()), pruned_at: AtomicUsize::new(0), pushdown_views: Mutex::new(HashMap::new()) }
    }

    /// The view of `state`'s row mask, when one exists and shows the row the index holds now.
    fn kept_view<'py>(&self, py: Python<'py>, state: StateId) -> Option<Bound<'py, PyArray1<u32>>> {
        let row = self.inner.kept_row(state)?;
        let views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        let (shown, view) = views.get(&state.as_u32())?;
        (*shown == Arc::as_ptr(&row) as usize).then(|| view.bind(py).clone())
    }

    /// A pushdown grammar's mask, one shared view per mask id.
    fn pushdown_bitmask<'py>(slf: Bound<'py, Self>, state: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let py = slf.py();
        let this = slf.get();
        let g = this.inner.clone();
        let id = run(py, move || g.mask_id(g.state(state)?))?;
        if let Some(view) = this.pushdown_views.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
            return Ok(view.bind(py).clone());
        }
        let s = this.inner.state(state).map_err(|e| to_py(py, e))?;
        let mask = this.inner.token_bitmask(s).map_err(|e| to_py(py, e))?;
        let view = match mask {
            Bitmask::Stored(mask) => ArrayView1::from(mask),
            _ => return Err(pyo3::exceptions::PyRuntimeError::new_err("internal error in the grammar core: a pushdown mask that is not stored")),
        };
        // SAFETY: a pushdown grammar's masks live in a paged store whose entries are never
        // mutated or moved once set, and `slf` (which owns the grammar through an Arc) is the
        // array's base object, so the memory outlives the array.
        let array = unsafe { PyArray1::borrow_from_array(&view, slf.clone().into_any()) };
        let kwargs = PyDict::new(py);
        kwargs.set_item("write", false)?;
        array.call_method("setflags", (), Some(&kwargs))?;
        let mut views = this.pushdown_views.lock().unwrap_or_else(|e| e.into_inner());
        let kept = views.entry(id).or_insert_with(|| array.clone().unbind());
        Ok(kept.bind(py).clone())
    }
}

#[pymethods]
impl Grammar {
    #[getter]
    fn initial_state(&self) -> u32 {
        self.inner.initial_state().as_u32()
    }

    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }

    /// For a JSON Schema whose exact grammar did not fit the limits: the sound restriction
    /// taken (what the grammar leaves out; every text it accepts is still valid). `None`
    /// otherwise.
    #[getter]
    fn restriction(&self) -> Option<String> {
        self.inner.restriction().map(str::to_string)
    }

    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab().size()
    }

    /// The EOS ids of the grammar's vocabulary (allowed exactly in accepting states).
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.vocab().eos_ids().iter().map(|t| t.as_u32()).collect()
    }

    /// What the grammar was compiled from: the regex, or the JSON of the schema or structure.
    #[getter]
    fn regex(&self) -> &str {
        self.inner.source()
    }

    /// The special tokens a structure allows, as {token id: the marker byte that spells it in
    /// this grammar's DFA and in `forced_bytes`}. Empty for regexes and schemas.
    #[getter]
    fn special_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for t in self.inner.special_tokens().iter() {
            d.set_item(t.token.as_u32(), PyBytes::new(py, &[t.byte]))?;
        }
        Ok(d)
    }

    /// The bytes `token_ids` write in this grammar's spelling (a structure's special tokens as
    /// their marker bytes, EOS as nothing), for `validate` or `repair` of a finished output.
    fn spell<'py>(&self, py: Python<'py>, token_ids: Vec<i64>) -> Bound<'py, PyBytes> {
        // An id outside the vocabulary writes nothing, as EOS does.
        let ids: Vec<TokenId> = token_ids.iter().filter_map(|&t| u32::try_from(t).ok()).map(TokenId::new).collect();
        PyBytes::new(py, &self.inner.spell(&ids))
    }

    /// Number of states whose row of the token index has been computed (for a pushdown
    /// grammar, rule states whose local masks have been).
    #[getter]
    fn states_built(&self) -> usize {
        self.inner.rows_built()
    }

    /// True for a pushdown grammar (recursive rules: its states are met as text is read, and
    /// `num_states` grows), false for one DFA.
    #[getter]
    fn is_pushdown(&self) -> bool {
        self.inner.is_pushdown()
    }

    /// An id for the mask of `state`: states with the same id have the same mask (a regular
    /// grammar's is the state itself). Caches of converted masks key on it.
    fn mask_id(&self, py: Python<'_>, state: i64) -> PyResult<u32> {
        let g = self.inner.clone();
        run(py, move || g.mask_id(g.state(state)?))
    }

    /// Allowed token ids in `state`, ascending, as numpy int32.
    fn allowed_token_ids<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let g = self.inner.clone();
        let ids = run(py, move || g.allowed_token_ids(g.state(state)?))?;
        Ok(PyArray1::from_iter(py, ids.into_iter().map(|t| t.as_u32() as i32)))
    }

    /// The allowed-token bitmask of `state` as a read-only numpy uint32 array of ceil(V/32)
    /// words (bit t%32 of word t//32). The same array object is returned on every call.
    fn token_bitmask<'py>(slf: Bound<'py, Self>, state: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let py = slf.py();
        let this = slf.get();
        if this.inner.is_pushdown() {
            return Grammar::pushdown_bitmask(slf, state);
        }
        let s = this.inner.state(state).map_err(|e| to_py(py, e))?;
        if let Some(view) = this.kept_view(py, s) {
            return Ok(view);
        }
        let g = this.inner.clone();
        let row = run(py, move || g.row(s))?;
        let owner = Bound::new(py, RowOwner { row })?;
        let view = ArrayView1::from(&owner.get().row.mask()[..]);
        // SAFETY: the mask lives in a row that is never mutated once computed, and `owner`
        // (which holds a share of that row) is the array's base object, so the memory outlives
        // the array.
        let array = unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) };
        // Read-only, once per row: callers share this array.
        let kwargs = PyDict::new(py);
        kwargs.set_item("write", false)?;
        array.call_method("setflags", (), Some(&kwargs))?;
        let mut views = this.views.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = this.inner.rows_dropped();
        if this.pruned_at.swap(dropped, Ordering::Relaxed) != dropped {
            // The index dropped rows: let go of their views, so their memory goes too.
            let g = &this.inner;
            views.retain(|&st, (shown, _)| g.kept_row(StateId::new(st)).is_some_and(|r| *shown == Arc::as_ptr(&r) as usize));
        }
        views.insert(s.as_u32(), (Arc::as_ptr(&owner.get().row) as usize, array.clone().unbind()));
        Ok(array)
    }

    /// `token_bitmask(state)` restricted to tokens after which acceptance stays reachable
    /// within `budget` more tokens. Returns the shared mask itself when the budget restricts
    /// nothing (the usual case), else a fresh array.
    fn token_bitmask_within<'py>(slf: Bound<'py, Self>, state: i64, budget: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let py = slf.py();
        let g = slf.get().inner.clone();
        let budget = u32::try_from(budget.max(0)).unwrap_or(u32::MAX);
        let restricted = run(py, move || {
            Ok(match g.token_bitmask_within(g.state(state)?, budget)? {
                Bitmask::Owned(mask) => Some(mask.into_vec()),
                _ => None,
            })
        })?;
        match restricted {
            None => Grammar::token_bitmask(slf, state),
            Some(mask) => Ok(PyArray1::from_vec(py, mask)),
        }
    }

    /// The state after `token_id`; raises `TokenNotAllowedError` if the mask forbids it.
    fn advance(&self, py: Python<'_>, state: i64, token_id: i64) -> PyResult<u32> {
        let g = &self.inner;
        let step = |state: StateId| match u32::try_from(token_id) {
            Ok(token) => g.advance(state, TokenId::new(token)),
            Err(_) => Err(CoreError::TokenNotAllowed { state, token: token_id, reason: OUTSIDE_VOCABULARY.into() }),
        };
        g.state(state).and_then(step).map(StateId::as_u32).map_err(|e| to_py(py, e))
    }

    /// True when the output so far fully matches.
    fn is_accepting(&self, py: Python<'_>, state: i64) -> PyResult<bool> {
        self.inner.state(state).and_then(|s| self.inner.is_accepting(s)).map_err(|e| to_py(py, e))
    }

    /// The longest byte string every valid continuation from `state` begins with.
    fn forced_bytes<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.inner.state(state).and_then(|s| self.inner.forced_bytes(s)).map_err(|e| to_py(py, e))?;
        Ok(PyBytes::new(py, &b))
    }

    /// The fewest tokens that reach acceptance from `state` (0 if accepting). The first call
    /// reads every state's tokens once, without keeping them in the index, as a compilation
    /// does (at the compile priority, pausing while a decoder holds compilations). For a pushdown grammar, the fewest bytes: with every byte a
    /// token of its own, a bound on the tokens.
    fn min_tokens_to_accept(&self, py: Python<'_>, state: i64) -> PyResult<u32> {
        let g = self.inner.clone();
        run_compile(py, move || g.min_tokens_to_accept(g.state(state)?))
    }

    /// The (token ids, next states) of every token allowed in `state` (ordinary tokens, then a
    /// structure's special tokens), as int32 arrays (EOS excluded).
    fn transitions<'py>(&self, py: Python<'py>, state: i64) -> PyResult<(Bound<'py, PyArray1<i32>>, Bound<'py, PyArray1<i32>>)> {
        let g = self.inner.clone();
        let pairs = run(py, move || g.transitions(g.state(state)?))?;
        Ok((
            PyArray1::from_iter(py, pairs.iter().map(|&(t, _)| t.as_u32() as i32)),
            PyArray1::from_iter(py, pairs.iter().map(|&(_, n)| n.as_u32() as i32)),
        ))
    }

    /// Does `text` (str or bytes) fully match? Returns a `Validation` whose `error_offset` is the
    /// byte offset where a match first becomes impossible (the text's length when it is a valid
    /// but incomplete prefix).
    fn validate(&self, py: Python<'_>, text: Bound<'_, PyAny>) -> PyResult<Validation> {
        let bytes = repair::text_bytes(&text)?;
        repair::validate(py, self.inner.clone(), bytes)
    }

    /// The string of the grammar's language closest to `text` under a cost model: by default
    /// the intent model, whose cheapest repair is the one a person would make (prose and code
    /// fences around the value deleted, quotes swapped, a truncated value closed; its weights
    /// are fitted and frozen, `weights={"name": n}` overrides some). Passing any of
    /// `insert_cost`, `delete_cost`, `substitute_cost` selects plain byte edit distance instead
    /// (unset ones cost 1). With `deadline_ms` or `max_expansions`, returns the best repair
    /// found in time with a proven lower bound.
    #[pyo3(signature = (text, max_cost=None, deadline_ms=None, *, insert_cost=None, delete_cost=None, substitute_cost=None, max_expansions=None, weights=None))]
    #[allow(clippy::too_many_arguments)]
    fn repair(
        &self,
        py: Python<'_>,
        text: Bound<'_, PyAny>,
        max_cost: Option<i64>,
        deadline_ms: Option<f64>,
        insert_cost: Option<u32>,
        delete_cost: Option<u32>,
        substitute_cost: Option<u32>,
        max_expansions: Option<usize>,
        weights: Option<BTreeMap<String, u32>>,
    ) -> PyResult<RepairResult> {
        let bytes = repair::text_bytes(&text)?;
        let weights = weights.map(|w| w.into_iter().collect());
        let opts =
            repair::options(max_cost, deadline_ms, insert_cost, delete_cost, substitute_cost, max_expansions, weights)?;
        repair::repair(py, self.inner.clone(), bytes, opts)
    }

    /// The intent model's frozen default weights, as a dict (see `repair`).
    #[staticmethod]
    fn repair_weights() -> BTreeMap<&'static str, u32> {
        repair::default_weights().into_iter().collect()
    }

    /// Computes every state's row now, in parallel (the eager build).
    fn build_all(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.inner.clone();
        run_compile(py, move || g.build_all())
    }

    fn __repr__(&self) -> String {
        format!("Grammar(num_states={}, vocab_size={})", self.inner.num_states(), self.inner.vocab().size())
    }
}
