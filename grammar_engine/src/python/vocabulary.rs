//! `Vocabulary`: a model's tokens as the core sees them, built from a tokenizer.
//!
//! The constructors read a Hugging Face `tokenizer.json` (from a file, a string, or a live
//! `transformers` / `tokenizers` / mlx-lm tokenizer object) or a GGUF header into the core
//! [`CoreVocabulary`], and do nothing more: the tokenizer self-test, which is Python code,
//! runs in `onyx.Vocabulary` (`onyx/vocabulary.py`), a Python subclass of this class. EOS ids
//! come from the caller, else from the files next to a `tokenizer.json`, else from well-known
//! end-of-turn tokens. The vocabulary also compiles regexes, JSON Schemas and structures into
//! `Grammar`s, since a grammar is always built for one vocabulary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::errors::{run, run_compile, InvalidSchemaError, InvalidStructureError, VocabularyError};
use super::grammar::Grammar;
use crate::automata::DfaConfig;
use crate::error::GrammarError as CoreError;
use crate::vocab::gguf;
use crate::grammar::{Grammar as CoreGrammar, GrammarConfig};
use crate::json_schema::JsonSchemaOptions;
use crate::util::TokenId;
use crate::vocab::tokenizer_json;
use crate::vocab::Vocabulary as CoreVocabulary;

/// A model vocabulary: token id → bytes, special tokens, EOS ids.
///
/// Subclassable: `onyx.Vocabulary` (Python) extends it with the tokenizer self-test, and wraps
/// what the static constructors here return with the copy constructor.
#[pyclass(frozen, subclass, module = "onyx._grammar")]
pub struct Vocabulary {
    inner: Arc<CoreVocabulary>,
}

#[pymethods]
impl Vocabulary {
    /// A vocabulary sharing `vocab`'s tables (nothing is copied).
    #[new]
    fn new(vocab: &Bound<'_, Vocabulary>) -> Self {
        Vocabulary { inner: vocab.get().inner.clone() }
    }

    /// Reads a Hugging Face `tokenizer.json`. EOS ids come from `eos_token_ids`, else from the
    /// `tokenizer_config.json` / `generation_config.json` / `config.json` next to it, else from
    /// well-known end-of-turn special tokens. `vocab_size` pads to the model's logits width.
    #[staticmethod]
    #[pyo3(signature = (path, eos_token_ids=None, vocab_size=None))]
    fn from_tokenizer_json(py: Python<'_>, path: PathBuf, eos_token_ids: Option<Vec<u32>>, vocab_size: Option<usize>) -> PyResult<Self> {
        let inner = run(py, move || {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CoreError::Vocabulary { reason: format!("cannot read {}: {e}", path.display()) })?;
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            build_from_json(&text, eos_token_ids, Some(&dir), vocab_size)
        })?;
        Ok(Vocabulary { inner: Arc::new(inner) })
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
            CoreVocabulary::new(tokens, eos_token_ids.map_or(eos, token_ids), family, vocab_size)
        })?;
        Ok(Vocabulary { inner: Arc::new(inner) })
    }

    /// From a Hugging Face fast tokenizer (`transformers`), a `tokenizers.Tokenizer`, or
    /// mlx-lm's `TokenizerWrapper`: reads its `tokenizer.json` text and EOS ids.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_token_ids=None, vocab_size=None))]
    fn from_hf(
        py: Python<'_>,
        tokenizer: Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
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
        Ok(Vocabulary { inner: Arc::new(inner) })
    }

    /// Compiles a regex (full-match semantics) to a `Grammar`.
    #[pyo3(signature = (pattern, *, max_states=None, max_index_bytes=None))]
    fn compile_regex(&self, py: Python<'_>, pattern: String, max_states: Option<usize>, max_index_bytes: Option<usize>) -> PyResult<Grammar> {
        let vocab = self.inner.clone();
        let config = config(max_states, max_index_bytes);
        let g = run_compile(py, move || CoreGrammar::from_regex(vocab, &pattern, &config))?;
        Ok(Grammar::wrap(g))
    }

    /// Compiles a GBNF grammar (llama.cpp's grammar language; the start rule is `root`) to a
    /// `Grammar`: one DFA when it has no recursion, else a pushdown grammar. Errors name the
    /// line, column and rule (`InvalidGrammarError`).
    #[pyo3(signature = (text, *, max_states=None, max_index_bytes=None))]
    fn compile_gbnf(&self, py: Python<'_>, text: String, max_states: Option<usize>, max_index_bytes: Option<usize>) -> PyResult<Grammar> {
        let vocab = self.inner.clone();
        let config = config(max_states, max_index_bytes);
        let g = run_compile(py, move || CoreGrammar::from_gbnf(vocab, &text, &config))?;
        Ok(Grammar::wrap(g))
    }

    /// Compiles a Lark grammar (the `lark` parser's grammar language in the subset llguidance
    /// documents; the start rule is `start`) to a `Grammar`, read as Lark's Earley parser with
    /// `lexer="dynamic"` reads it: terminals match at any position, `%ignore`d text may come
    /// before every terminal and at the end. `%import common.NAME` and llguidance's `%json {...}`
    /// work. One DFA when it has no recursion, else a pushdown grammar. Errors name the line,
    /// column and rule (`InvalidGrammarError`).
    #[pyo3(signature = (text, *, max_states=None, max_index_bytes=None))]
    fn compile_lark(&self, py: Python<'_>, text: String, max_states: Option<usize>, max_index_bytes: Option<usize>) -> PyResult<Grammar> {
        let vocab = self.inner.clone();
        let config = config(max_states, max_index_bytes);
        let g = run_compile(py, move || CoreGrammar::from_lark(vocab, &text, &config))?;
        Ok(Grammar::wrap(g))
    }

    /// Compiles a JSON Schema (a dict or a JSON string) to a `Grammar`. Output is compact JSON
    /// unless `max_whitespace` allows up to that many whitespace characters between tokens.
    /// When the exact grammar is over a limit it is compiled under a sound restriction
    /// (`Grammar.restriction` says which), unless `allow_restriction=False`: then that is a
    /// `GrammarTooLargeError`.
    #[pyo3(signature = (schema, *, max_whitespace=0, max_any_depth=3, max_states=None, max_index_bytes=None, allow_restriction=true))]
    #[allow(clippy::too_many_arguments)]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: Bound<'_, PyAny>,
        max_whitespace: usize,
        max_any_depth: usize,
        max_states: Option<usize>,
        max_index_bytes: Option<usize>,
        allow_restriction: bool,
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
        let options = JsonSchemaOptions { max_whitespace, max_any_depth, allow_restriction, ..JsonSchemaOptions::default() };
        let g = run_compile(py, move || {
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CoreError::InvalidSchema { path: "#".into(), reason: format!("not valid JSON: {e}") })?;
            CoreGrammar::from_json_schema(vocab, &value, &options, &config)
        })?;
        Ok(Grammar::wrap(g))
    }

    /// Compiles a structure spec to one `Grammar`: a dict or list, or its JSON text as a `str`
    /// (as `compile_json_schema` takes a schema; a spec that is one literal text is the JSON
    /// string `'"text"'`). The spec's syntax is in docs/architecture.md ("Structures").
    /// `max_whitespace` and `max_any_depth` apply to the `json_schema` parts that set none of
    /// their own.
    #[pyo3(signature = (spec, *, max_whitespace=0, max_any_depth=3, max_states=None, max_index_bytes=None))]
    fn compile_structure(
        &self,
        py: Python<'_>,
        spec: Bound<'_, PyAny>,
        max_whitespace: usize,
        max_any_depth: usize,
        max_states: Option<usize>,
        max_index_bytes: Option<usize>,
    ) -> PyResult<Grammar> {
        let text: String = if let Ok(s) = spec.cast::<PyString>() {
            s.to_str()?.to_string()
        } else {
            let json = py.import("json")?;
            match json.call_method1("dumps", (spec,)) {
                Ok(s) => s.extract()?,
                Err(e) => {
                    return Err(InvalidStructureError::new_err(format!(
                        "invalid structure at #: not JSON-serialisable: {}",
                        e.value(py)
                    )))
                }
            }
        };
        let vocab = self.inner.clone();
        let config = config(max_states, max_index_bytes);
        let options = JsonSchemaOptions { max_whitespace, max_any_depth, ..JsonSchemaOptions::default() };
        let g = run_compile(py, move || {
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CoreError::InvalidStructure { path: "#".into(), reason: format!("not valid JSON: {e}") })?;
            CoreGrammar::from_structure(vocab, &value, &options, &config)
        })?;
        Ok(Grammar::wrap(g))
    }

    /// The ids of the tokens whose text is exactly `text` (str or bytes): special tokens first,
    /// then ordinary ones. Empty when no single token writes it.
    fn find_tokens(&self, text: Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let bytes: Vec<u8> = if let Ok(s) = text.cast::<PyString>() {
            s.to_str()?.as_bytes().to_vec()
        } else {
            text.extract::<Vec<u8>>()?
        };
        Ok(self.inner.find_tokens(&bytes).into_iter().map(TokenId::as_u32).collect())
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
        self.inner.eos_ids().iter().map(|t| t.as_u32()).collect()
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
        let bytes = u32::try_from(token_id).ok().and_then(|id| self.inner.token_bytes(TokenId::new(id)));
        match bytes {
            Some(b) => Ok(PyBytes::new(py, b)),
            None => Err(VocabularyError::new_err(format!("token id {token_id} is outside the vocabulary of {}", self.inner.size()))),
        }
    }

    /// True for special/control tokens and ids without a token (EOS included).
    fn is_special(&self, token_id: i64) -> bool {
        u32::try_from(token_id).map_or(true, |id| self.inner.is_special(TokenId::new(id)))
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocabulary(size={}, family={}, eos_token_ids={:?})",
            self.inner.size(),
            self.inner.family().name(),
            self.inner.eos_ids().iter().map(|t| t.as_u32()).collect::<Vec<_>>()
        )
    }
}

/// The core's size limits, with the ones given as keyword arguments.
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

/// The EOS ids a tokenizer object declares (`eos_token_ids`, else `eos_token_id`).
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

/// Token ids as Python hands them over (already `u32`s).
fn token_ids(ids: Vec<u32>) -> Vec<TokenId> {
    ids.into_iter().map(TokenId::new).collect()
}

/// A vocabulary from a `tokenizer.json`'s text; without `eos`, EOS ids come from the sidecar
/// files in `dir` and the tokenizer's well-known end-of-turn tokens.
fn build_from_json(text: &str, eos: Option<Vec<u32>>, dir: Option<&Path>, vocab_size: Option<usize>) -> Result<CoreVocabulary, CoreError> {
    let parsed = tokenizer_json::parse(text)?;
    let eos = match eos {
        Some(ids) => token_ids(ids),
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
