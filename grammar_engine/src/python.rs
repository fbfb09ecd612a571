//! The PyO3 module `onyx._grammar`: a thin layer over the Rust core.
//!
//! Each method converts arguments, releases the GIL for heavy work, calls the core, and maps
//! [`GrammarError`] variants onto Python exception classes (all subclasses of `GrammarError`,
//! itself a `ValueError`). Panics are caught at this boundary and raised as `GrammarError`
//! rather than crossing into Python.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::dfa::DfaConfig;
use crate::error::GrammarError as CoreError;
use crate::gguf::{self, GgufValue};
use crate::grammar::{Grammar as CoreGrammar, GrammarConfig};
use crate::json_schema::JsonSchemaOptions;
use crate::repair::{self, EditKind, RepairOptions, RepairStatus};
use crate::tokenizer_json;
use crate::vocab::Vocabulary as CoreVocabulary;

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

fn to_py(py: Python<'_>, e: CoreError) -> PyErr {
    let msg = e.to_string();
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
    };
    // Structured fields for callers that want more than the message (the server's 400s).
    let value = err.value(py);
    let _ = match &e {
        CoreError::InvalidRegex { offset, .. } => value.setattr("offset", *offset),
        CoreError::UnsupportedSchemaKeyword { keyword, path, .. } => {
            value.setattr("keyword", keyword.as_str()).and_then(|_| value.setattr("path", path.as_str()))
        }
        CoreError::InvalidSchema { path, .. } => value.setattr("path", path.as_str()),
        _ => Ok(()),
    };
    err
}

/// Runs `f` with the GIL released, turning core errors and panics into Python exceptions.
fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, CoreError> + Send) -> PyResult<T> {
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

fn state_id(state: i64) -> u32 {
    // Out-of-range ids become u32::MAX, which the core rejects as an invalid state.
    u32::try_from(state).unwrap_or(u32::MAX)
}

/// A model vocabulary: token id → bytes, special tokens, EOS ids.
#[pyclass(frozen, module = "onyx._grammar")]
pub struct Vocabulary {
    inner: Arc<CoreVocabulary>,
}

#[pymethods]
impl Vocabulary {
    /// Reads a Hugging Face `tokenizer.json`. EOS ids come from `eos_token_ids`, else from the
    /// `tokenizer_config.json` / `generation_config.json` / `config.json` next to it, else from
    /// well-known end-of-turn special tokens. `vocab_size` pads to the model's logits width.
    #[staticmethod]
    #[pyo3(signature = (path, eos_token_ids=None, vocab_size=None, *, self_test=true, strict=false))]
    fn from_tokenizer_json(
        py: Python<'_>,
        path: PathBuf,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
        self_test: bool,
        strict: bool,
    ) -> PyResult<Py<Self>> {
        let file = path.clone();
        let inner = run(py, move || {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| CoreError::Vocabulary { reason: format!("cannot read {}: {e}", file.display()) })?;
            let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
            build_from_json(&text, eos_token_ids, Some(&dir), vocab_size)
        })?;
        let vocab = Py::new(py, Vocabulary { inner: Arc::new(inner) })?;
        if self_test {
            let tokenizers = py.import("tokenizers")?;
            let tok = tokenizers.getattr("Tokenizer")?.call_method1("from_file", (path.to_string_lossy().into_owned(),))?;
            run_self_test(py, &vocab, &tok, strict)?;
        }
        Ok(vocab)
    }

    /// Same as `from_tokenizer_json`, from the file's text.
    #[staticmethod]
    #[pyo3(signature = (text, eos_token_ids=None, vocab_size=None))]
    fn from_tokenizer_json_str(py: Python<'_>, text: String, eos_token_ids: Option<Vec<u32>>, vocab_size: Option<usize>) -> PyResult<Self> {
        let inner = run(py, move || build_from_json(&text, eos_token_ids, None, vocab_size))?;
        Ok(Vocabulary { inner: Arc::new(inner) })
    }

    /// Reads the tokenizer in a GGUF file's header (the tensors are not read).
    #[staticmethod]
    #[pyo3(signature = (path, eos_token_ids=None, vocab_size=None))]
    fn from_gguf(py: Python<'_>, path: PathBuf, eos_token_ids: Option<Vec<u32>>, vocab_size: Option<usize>) -> PyResult<Self> {
        let inner = run(py, move || {
            let meta = gguf::read_metadata(&path)?;
            let (tokens, family, eos) = gguf::tokenizer_from_metadata(&meta)?;
            CoreVocabulary::new(tokens, eos_token_ids.unwrap_or(eos), family, vocab_size)
        })?;
        Ok(Vocabulary { inner: Arc::new(inner) })
    }

    /// From a Hugging Face fast tokenizer (`transformers`), a `tokenizers.Tokenizer`, or
    /// mlx-lm's `TokenizerWrapper`. Unless `self_test=False`, the tokenizer self-test then
    /// checks that its tokens decode to the bytes assumed here (warning on a mismatch, or
    /// raising with `strict=True`); its result is cached by a hash of the tokenizer.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_token_ids=None, vocab_size=None, *, self_test=true, strict=false))]
    fn from_hf(
        py: Python<'_>,
        tokenizer: Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
        self_test: bool,
        strict: bool,
    ) -> PyResult<Py<Self>> {
        let original = tokenizer.clone();
        let mut eos = eos_token_ids.or_else(|| eos_ids_of(&tokenizer));
        let mut tok = tokenizer;
        // mlx-lm wraps the Hugging Face tokenizer.
        if tok.hasattr("_tokenizer")? && !tok.hasattr("backend_tokenizer")? && !tok.hasattr("to_str")? {
            tok = tok.getattr("_tokenizer")?;
            eos = eos.or_else(|| eos_ids_of(&tok));
        }
        let text: String = if tok.hasattr("backend_tokenizer")? {
            tok.getattr("backend_tokenizer")?.call_method0("to_str")?.extract()?
        } else if tok.hasattr("to_str")? {
            tok.call_method0("to_str")?.extract()?
        } else {
            return Err(VocabularyError::new_err(
                "cannot build vocabulary: from_hf needs a fast (Rust-backed) Hugging Face tokenizer",
            ));
        };
        let inner = run(py, move || build_from_json(&text, eos, None, vocab_size))?;
        let vocab = Py::new(py, Vocabulary { inner: Arc::new(inner) })?;
        if self_test {
            run_self_test(py, &vocab, &original, strict)?;
        }
        Ok(vocab)
    }

    /// Compiles a regex (full-match semantics) to a `Grammar`.
    #[pyo3(signature = (pattern, *, max_states=None, max_index_bytes=None))]
    fn compile_regex(&self, py: Python<'_>, pattern: String, max_states: Option<usize>, max_index_bytes: Option<usize>) -> PyResult<Grammar> {
        let vocab = self.inner.clone();
        let config = config(max_states, max_index_bytes);
        let g = run(py, move || CoreGrammar::from_regex(vocab, &pattern, &config))?;
        Ok(Grammar::wrap(g))
    }

    /// Compiles a JSON Schema (a dict or a JSON string) to a `Grammar`. Output is compact JSON
    /// unless `max_whitespace` allows up to that many whitespace characters between tokens.
    #[pyo3(signature = (schema, *, max_whitespace=0, max_any_depth=3, max_states=None, max_index_bytes=None))]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: Bound<'_, PyAny>,
        max_whitespace: usize,
        max_any_depth: usize,
        max_states: Option<usize>,
        max_index_bytes: Option<usize>,
    ) -> PyResult<Grammar> {
        let text: String = if let Ok(s) = schema.cast::<PyString>() {
            s.to_str()?.to_string()
        } else {
            let json = py.import("json")?;
            match json.call_method1("dumps", (schema,)) {
                Ok(s) => s.extract()?,
                Err(e) => {
                    return Err(InvalidSchemaError::new_err(format!(
                        "invalid JSON Schema at #: not JSON-serialisable: {}",
                        e.value(py)
                    )))
                }
            }
        };
        let vocab = self.inner.clone();
        let config = config(max_states, max_index_bytes);
        let options = JsonSchemaOptions { max_whitespace, max_any_depth, ..JsonSchemaOptions::default() };
        let g = run(py, move || {
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CoreError::InvalidSchema { path: "#".into(), reason: format!("not valid JSON: {e}") })?;
            CoreGrammar::from_json_schema(vocab, &value, &options, &config)
        })?;
        Ok(Grammar::wrap(g))
    }

    /// Number of token ids (the bit width of a mask).
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    fn __len__(&self) -> usize {
        self.inner.size()
    }

    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_ids().to_vec()
    }

    /// `byte_level`, `sentencepiece` or `raw`.
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.family().name()
    }

    /// Number of tokens a grammar may ever allow (not special, not empty, not EOS).
    #[getter]
    fn num_allowed_tokens(&self) -> usize {
        self.inner.num_candidates()
    }

    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// The bytes token `token_id` writes.
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = u32::try_from(token_id).ok().and_then(|id| self.inner.token_bytes(id));
        match bytes {
            Some(b) => Ok(PyBytes::new(py, b)),
            None => Err(VocabularyError::new_err(format!("token id {token_id} is outside the vocabulary of {}", self.inner.size()))),
        }
    }

    /// True for special/control tokens and ids without a token (EOS included).
    fn is_special(&self, token_id: i64) -> bool {
        u32::try_from(token_id).map_or(true, |id| self.inner.is_special(id))
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocabulary(size={}, family={}, eos_token_ids={:?})",
            self.inner.size(),
            self.inner.family().name(),
            self.inner.eos_ids()
        )
    }
}

/// Runs `onyx.tokenizer_check.self_test(vocab, tokenizer, strict=strict)`.
fn run_self_test(py: Python<'_>, vocab: &Py<Vocabulary>, tokenizer: &Bound<'_, PyAny>, strict: bool) -> PyResult<()> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("strict", strict)?;
    py.import("onyx.tokenizer_check")?.getattr("self_test")?.call((vocab.clone_ref(py), tokenizer), Some(&kwargs))?;
    Ok(())
}

fn config(max_states: Option<usize>, max_index_bytes: Option<usize>) -> GrammarConfig {
    let mut c = GrammarConfig::default();
    if let Some(m) = max_states {
        c.dfa = DfaConfig { max_states: m, ..c.dfa };
    }
    if let Some(m) = max_index_bytes {
        c.max_index_bytes = m;
    }
    c
}

fn eos_ids_of(tok: &Bound<'_, PyAny>) -> Option<Vec<u32>> {
    for attr in ["eos_token_ids", "eos_token_id"] {
        if let Ok(v) = tok.getattr(attr) {
            if let Ok(id) = v.extract::<u32>() {
                return Some(vec![id]);
            }
            if let Ok(ids) = v.extract::<Vec<u32>>() {
                if !ids.is_empty() {
                    return Some(ids);
                }
            }
        }
    }
    None
}

fn build_from_json(text: &str, eos: Option<Vec<u32>>, dir: Option<&Path>, vocab_size: Option<usize>) -> Result<CoreVocabulary, CoreError> {
    let parsed = tokenizer_json::parse(text)?;
    let eos = match eos {
        Some(ids) => ids,
        None => {
            let (names, ids) = dir.map(tokenizer_json::eos_from_sidecars).unwrap_or_default();
            let mut all = ids;
            for id in tokenizer_json::resolve_eos(&parsed, &names) {
                if !all.contains(&id) {
                    all.push(id);
                }
            }
            all
        }
    };
    CoreVocabulary::new(parsed.tokens, eos, parsed.family, vocab_size)
}

/// A compiled grammar: the step API the decoding loop calls once per token.
#[pyclass(frozen, module = "onyx._grammar")]
pub struct Grammar {
    inner: Arc<CoreGrammar>,
    /// One read-only NumPy view per state's mask, made on first request and handed out again
    /// after that, so `token_bitmask` never copies.
    views: Box<[OnceLock<Py<PyArray1<u32>>>]>,
}

impl Grammar {
    fn wrap(g: CoreGrammar) -> Self {
        let views = (0..g.num_states()).map(|_| OnceLock::new()).collect();
        Grammar { inner: Arc::new(g), views }
    }
}

#[pymethods]
impl Grammar {
    #[getter]
    fn initial_state(&self) -> u32 {
        self.inner.initial_state()
    }

    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
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
        self.inner.vocab().eos_ids().to_vec()
    }

    /// The regex the grammar was compiled from (for a schema, the regex it compiled to).
    #[getter]
    fn regex(&self) -> &str {
        self.inner.source()
    }

    /// Number of states whose row of the token index has been computed.
    #[getter]
    fn states_built(&self) -> usize {
        self.inner.rows_built()
    }

    /// Allowed token ids in `state`, ascending, as numpy int32.
    fn allowed_token_ids<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let g = self.inner.clone();
        let ids = run(py, move || g.allowed_token_ids(state_id(state)))?;
        Ok(PyArray1::from_iter(py, ids.into_iter().map(|t| t as i32)))
    }

    /// The allowed-token bitmask of `state` as a read-only numpy uint32 array of ceil(V/32)
    /// words (bit t%32 of word t//32). The same array object is returned on every call.
    fn token_bitmask<'py>(slf: Bound<'py, Self>, state: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let py = slf.py();
        let this = slf.get();
        let s = state_id(state);
        if let Some(view) = this.views.get(s as usize).and_then(OnceLock::get) {
            return Ok(view.bind(py).clone());
        }
        let g = this.inner.clone();
        run(py, move || g.row(s).map(|_| ()))?;
        let mask = this.inner.token_bitmask(s).map_err(|e| to_py(py, e))?;
        let view = ArrayView1::from(mask);
        // SAFETY: the mask lives in a `OnceLock` row of the grammar, which is never mutated or
        // moved once set, and `slf` (which owns the grammar through an Arc) is the array's base
        // object, so the memory outlives the array.
        let array = unsafe { PyArray1::borrow_from_array(&view, slf.clone().into_any()) };
        // Read-only, once per state: callers share this array.
        let kwargs = PyDict::new(py);
        kwargs.set_item("write", false)?;
        array.call_method("setflags", (), Some(&kwargs))?;
        let cell = &this.views[s as usize];
        let _ = cell.set(array.clone().unbind());
        Ok(cell.get().map(|v| v.bind(py).clone()).unwrap_or(array))
    }

    /// `token_bitmask(state)` restricted to tokens after which acceptance stays reachable
    /// within `budget` more tokens. Returns the shared mask itself when the budget restricts
    /// nothing (the usual case), else a fresh array.
    fn token_bitmask_within<'py>(slf: Bound<'py, Self>, state: i64, budget: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let py = slf.py();
        let g = slf.get().inner.clone();
        let s = state_id(state);
        let budget = u32::try_from(budget.max(0)).unwrap_or(u32::MAX);
        let restricted = run(py, move || {
            Ok(match g.token_bitmask_within(s, budget)? {
                std::borrow::Cow::Borrowed(_) => None,
                std::borrow::Cow::Owned(mask) => Some(mask),
            })
        })?;
        match restricted {
            None => Grammar::token_bitmask(slf, state),
            Some(mask) => Ok(PyArray1::from_vec(py, mask)),
        }
    }

    /// The state after `token_id`; raises `TokenNotAllowedError` if the mask forbids it.
    fn advance(&self, py: Python<'_>, state: i64, token_id: i64) -> PyResult<u32> {
        let token = u32::try_from(token_id).unwrap_or(u32::MAX);
        self.inner.advance(state_id(state), token).map_err(|e| to_py(py, e))
    }

    /// True when the output so far fully matches.
    fn is_accepting(&self, py: Python<'_>, state: i64) -> PyResult<bool> {
        self.inner.is_accepting(state_id(state)).map_err(|e| to_py(py, e))
    }

    /// The longest byte string every valid continuation from `state` begins with.
    fn forced_bytes<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.inner.forced_bytes(state_id(state)).map_err(|e| to_py(py, e))?;
        Ok(PyBytes::new(py, &b))
    }

    /// The fewest tokens that reach acceptance from `state` (0 if accepting). The first call
    /// builds the whole index.
    fn min_tokens_to_accept(&self, py: Python<'_>, state: i64) -> PyResult<u32> {
        let g = self.inner.clone();
        run(py, move || g.min_tokens_to_accept(state_id(state)))
    }

    /// The (token ids, next states) of every ordinary token allowed in `state`, as int32
    /// arrays (EOS excluded).
    fn transitions<'py>(&self, py: Python<'py>, state: i64) -> PyResult<(Bound<'py, PyArray1<i32>>, Bound<'py, PyArray1<i32>>)> {
        let g = self.inner.clone();
        let s = state_id(state);
        let pairs = run(py, move || g.transitions(s))?;
        Ok((
            PyArray1::from_iter(py, pairs.iter().map(|&(t, _)| t as i32)),
            PyArray1::from_iter(py, pairs.iter().map(|&(_, n)| n as i32)),
        ))
    }

    /// Does `text` (str or bytes) fully match? Returns a `Validation` whose `error_offset` is the
    /// byte offset where a match first becomes impossible (the text's length when it is a valid
    /// but incomplete prefix).
    fn validate(&self, py: Python<'_>, text: Bound<'_, PyAny>) -> PyResult<Validation> {
        let bytes = text_bytes(&text)?;
        let g = self.inner.clone();
        let v = run(py, move || Ok(repair::validate(g.dfa(), &bytes)))?;
        Ok(Validation { valid: v.valid, error_offset: v.error_offset })
    }

    /// The string of the grammar's language closest to `text` in byte edit distance
    /// (insertions, deletions, substitutions; unit costs by default). With `deadline_ms` or
    /// `max_expansions`, returns the best repair found in time with a proven lower bound.
    #[pyo3(signature = (text, max_cost=None, deadline_ms=None, *, insert_cost=1, delete_cost=1, substitute_cost=1, max_expansions=None))]
    #[allow(clippy::too_many_arguments)]
    fn repair(
        &self,
        py: Python<'_>,
        text: Bound<'_, PyAny>,
        max_cost: Option<i64>,
        deadline_ms: Option<f64>,
        insert_cost: u32,
        delete_cost: u32,
        substitute_cost: u32,
        max_expansions: Option<usize>,
    ) -> PyResult<RepairResult> {
        let bytes = text_bytes(&text)?;
        if insert_cost == 0 || delete_cost == 0 || substitute_cost == 0 {
            return Err(PyValueError::new_err("edit costs must be at least 1"));
        }
        let deadline = match deadline_ms {
            Some(ms) if !(ms >= 0.0 && ms.is_finite()) => {
                return Err(PyValueError::new_err(format!("deadline_ms must be a non-negative number, got {ms}")))
            }
            Some(ms) => Some(std::time::Duration::from_secs_f64(ms / 1000.0)),
            None => None,
        };
        let max_cost = match max_cost {
            Some(c) if c < 0 => return Err(PyValueError::new_err(format!("max_cost must be >= 0, got {c}"))),
            Some(c) => Some(u32::try_from(c).unwrap_or(u32::MAX)),
            None => None,
        };
        let opts = RepairOptions { insert_cost, delete_cost, substitute_cost, max_cost, deadline, max_expansions };
        let g = self.inner.clone();
        let r = run(py, move || Ok(repair::repair(g.dfa(), &bytes, &opts)))?;
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

    /// Computes every state's row now, in parallel (the eager build).
    fn build_all(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.inner.clone();
        run(py, move || g.build_all())
    }

    fn __repr__(&self) -> String {
        format!("Grammar(num_states={}, vocab_size={})", self.inner.num_states(), self.inner.vocab().size())
    }
}

fn text_bytes(text: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = text.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    if let Ok(b) = text.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    Err(pyo3::exceptions::PyTypeError::new_err("text must be str or bytes"))
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

/// Reads the metadata of a GGUF file's header into a dict (arrays become lists).
#[pyfunction]
fn read_gguf_metadata<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let meta: BTreeMap<String, GgufValue> = run(py, move || gguf::read_metadata(&path))?;
    let out = PyDict::new(py);
    for (k, v) in &meta {
        out.set_item(k, gguf_to_py(py, v)?)?;
    }
    Ok(out)
}

fn gguf_to_py<'py>(py: Python<'py>, v: &GgufValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        GgufValue::Uint(x) => x.into_pyobject(py)?.into_any(),
        GgufValue::Int(x) => x.into_pyobject(py)?.into_any(),
        GgufValue::Float(x) => x.into_pyobject(py)?.into_any(),
        GgufValue::Bool(x) => pyo3::types::PyBool::new(py, *x).to_owned().into_any(),
        GgufValue::Str(s) => PyString::new(py, s).into_any(),
        GgufValue::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(gguf_to_py(py, item)?)?;
            }
            list.into_any()
        }
    })
}

#[pymodule]
fn _grammar(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Vocabulary>()?;
    m.add_class::<Grammar>()?;
    m.add_class::<Validation>()?;
    m.add_class::<RepairResult>()?;
    m.add_function(wrap_pyfunction!(read_gguf_metadata, m)?)?;
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
    Ok(())
}
