"""Type stub of `onyx._grammar`, the Rust grammar core's PyO3 module (grammar_engine/src/python).

A `Vocabulary` is a model's tokens as the core sees them; it compiles regexes, JSON Schemas and
structures into `Grammar`s, whose step API the decoding loop calls once per token. States and
tokens are plain ints. Every error the core raises is a `GrammarError` (a `ValueError`).
tests/grammar/test_grammar_stub.py checks this file against the built module.
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

_V = TypeVar("_V", bound="Vocabulary")

_Path = str | os.PathLike[str]

class Vocabulary:
    """A model vocabulary: token id → bytes, special tokens, EOS ids.

    Subclassable: `onyx.Vocabulary` (Python) extends it with the tokenizer self-test, and wraps
    what the static constructors here return with the copy constructor.
    """

    def __new__(cls: type[_V], vocab: Vocabulary) -> _V:
        """A vocabulary sharing `vocab`'s tables (nothing is copied)."""
    @staticmethod
    def from_tokenizer_json(
        path: _Path, eos_token_ids: Sequence[int] | None = None, vocab_size: int | None = None
    ) -> Vocabulary:
        """Reads a Hugging Face `tokenizer.json`. EOS ids come from `eos_token_ids`, else from the
        `tokenizer_config.json` / `generation_config.json` / `config.json` next to it, else from
        well-known end-of-turn special tokens. `vocab_size` pads to the model's logits width."""
    @staticmethod
    def from_tokenizer_json_str(
        text: str, eos_token_ids: Sequence[int] | None = None, vocab_size: int | None = None
    ) -> Vocabulary:
        """Same as `from_tokenizer_json`, from the file's text."""
    @staticmethod
    def from_gguf(path: _Path, eos_token_ids: Sequence[int] | None = None, vocab_size: int | None = None) -> Vocabulary:
        """Reads the tokenizer in a GGUF file's header (the tensors are not read)."""
    @staticmethod
    def from_hf(tokenizer: Any, eos_token_ids: Sequence[int] | None = None, vocab_size: int | None = None) -> Vocabulary:
        """From a Hugging Face fast tokenizer (`transformers`), a `tokenizers.Tokenizer`, or
        mlx-lm's `TokenizerWrapper`: reads its `tokenizer.json` text and EOS ids."""
    def compile_regex(self, pattern: str, *, max_states: int | None = None, max_index_bytes: int | None = None) -> Grammar:
        """Compiles a regex (full-match semantics) to a `Grammar`."""
    def compile_json_schema(
        self,
        schema: str | Mapping[str, Any] | bool,
        *,
        max_whitespace: int = 0,
        max_any_depth: int = 3,
        max_states: int | None = None,
        max_index_bytes: int | None = None,
        allow_restriction: bool = True,
    ) -> Grammar:
        """Compiles a JSON Schema (a dict or a JSON string) to a `Grammar`. Output is compact JSON
        unless `max_whitespace` allows up to that many whitespace characters between tokens. When
        the exact grammar is over a limit it is compiled under a sound restriction
        (`Grammar.restriction` says which), unless `allow_restriction=False`: then that is a
        `GrammarTooLargeError`."""
    def compile_structure(
        self,
        spec: Any,
        *,
        max_whitespace: int = 0,
        max_any_depth: int = 3,
        max_states: int | None = None,
        max_index_bytes: int | None = None,
    ) -> Grammar:
        """Compiles a structure spec to one `Grammar`: a dict or list, or its JSON text as a `str`
        (as `compile_json_schema` takes a schema; a spec that is one literal text is the JSON
        string `'"text"'`). The spec's syntax is in docs/architecture.md ("Structures").
        `max_whitespace` and `max_any_depth` apply to the `json_schema` parts that set none of
        their own."""
    def compile_gbnf(self, text: str, *, max_states: int | None = None, max_index_bytes: int | None = None) -> Grammar:
        """Compiles a GBNF grammar (llama.cpp's grammar language; the start rule is `root`) to a
        `Grammar`: one DFA when it has no recursion, else a pushdown grammar. Errors name the
        line, column and rule (`InvalidGrammarError`)."""
    def compile_lark(self, text: str, *, max_states: int | None = None, max_index_bytes: int | None = None) -> Grammar:
        """Compiles a Lark grammar (the `lark` parser's grammar language in the subset llguidance
        documents; the start rule is `start`) to a `Grammar`, read as Lark's Earley parser with
        `lexer="dynamic"` reads it: terminals match at any position, `%ignore`d text may come
        before every terminal and at the end. `%import common.NAME` and llguidance's
        `%json {...}` work. One DFA when it has no recursion, else a pushdown grammar. Errors
        name the line, column and rule (`InvalidGrammarError`)."""
    def find_tokens(self, text: str | bytes) -> list[int]:
        """The ids of the tokens whose text is exactly `text`: special tokens first, then ordinary
        ones. Empty when no single token writes it."""
    @property
    def size(self) -> int:
        """Number of token ids (the bit width of a mask)."""
    def __len__(self) -> int:
        """Number of token ids, as `size`."""
    @property
    def eos_token_ids(self) -> list[int]:
        """The ids that end generation."""
    @property
    def family(self) -> Literal["byte_level", "sentencepiece", "raw"]:
        """How the tokenizer writes bytes into token strings."""
    @property
    def num_allowed_tokens(self) -> int:
        """Number of tokens a grammar may ever allow (not special, not empty, not EOS)."""
    @property
    def memory_bytes(self) -> int:
        """Heap bytes held by the vocabulary and its token trie."""
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token `token_id` writes; `VocabularyError` outside the vocabulary."""
    def is_special(self, token_id: int) -> bool:
        """True for special/control tokens and ids without a token (EOS included)."""
    def __repr__(self) -> str:
        """`Vocabulary(size=..., family=..., eos_token_ids=[...])`."""

class Grammar:
    """A compiled grammar: the step API the decoding loop calls once per token.

    Made by `Vocabulary.compile_regex`, `compile_json_schema`, `compile_structure`,
    `compile_gbnf` or `compile_lark`. A state is an int; one that is not this grammar's raises
    `InvalidStateError`.
    """

    @property
    def initial_state(self) -> int:
        """The state before any token."""
    @property
    def num_states(self) -> int:
        """Number of states (valid states are `0 .. num_states - 1`)."""
    @property
    def restriction(self) -> str | None:
        """For a JSON Schema whose exact grammar did not fit the limits: the sound restriction
        taken (what the grammar leaves out; every text it accepts is still valid). `None`
        otherwise."""
    @property
    def memory_bytes(self) -> int:
        """Heap bytes held: the DFA, the rows built so far and the caches."""
    @property
    def vocab_size(self) -> int:
        """Number of token ids of the grammar's vocabulary."""
    @property
    def eos_token_ids(self) -> list[int]:
        """The EOS ids of the grammar's vocabulary (allowed exactly in accepting states)."""
    @property
    def regex(self) -> str:
        """What the grammar was compiled from: the regex, or the JSON of the schema or structure."""
    @property
    def special_tokens(self) -> dict[int, bytes]:
        """The special tokens a structure allows, as {token id: the marker byte that spells it in
        this grammar's DFA and in `forced_bytes`}. Empty for regexes and schemas."""
    def spell(self, token_ids: Sequence[int]) -> bytes:
        """The bytes `token_ids` write in this grammar's spelling (a structure's special tokens as
        their marker bytes, EOS as nothing), for `validate` or `repair` of a finished output."""
    @property
    def states_built(self) -> int:
        """Number of states whose row of the token index has been computed (for a pushdown
        grammar, rule states whose local masks have been)."""
    @property
    def is_pushdown(self) -> bool:
        """True for a pushdown grammar (recursive rules: its states are met as text is read, and
        `num_states` grows), false for one DFA."""
    def mask_id(self, state: int) -> int:
        """An id for the mask of `state`: states with the same id have the same mask (a regular
        grammar's is the state itself). Caches of converted masks key on it."""
    def allowed_token_ids(self, state: int) -> NDArray[np.int32]:
        """Allowed token ids in `state`, ascending."""
    def token_bitmask(self, state: int) -> NDArray[np.uint32]:
        """The allowed-token bitmask of `state` as a read-only array of ceil(V/32) words (bit t%32
        of word t//32). The same array object is returned on every call."""
    def token_bitmask_within(self, state: int, budget: int) -> NDArray[np.uint32]:
        """`token_bitmask(state)` restricted to tokens after which acceptance stays reachable
        within `budget` more tokens. Returns the shared mask itself when the budget restricts
        nothing (the usual case), else a fresh array."""
    def advance(self, state: int, token_id: int) -> int:
        """The state after `token_id`; raises `TokenNotAllowedError` if the mask forbids it."""
    def is_accepting(self, state: int) -> bool:
        """True when the output so far fully matches."""
    def forced_bytes(self, state: int) -> bytes:
        """The longest byte string every valid continuation from `state` begins with."""
    def min_tokens_to_accept(self, state: int) -> int:
        """The fewest tokens that reach acceptance from `state` (0 if accepting). The first call
        reads every state's tokens once, without keeping them in the index (its memory grows only
        with the states visited). For a pushdown grammar, the fewest bytes: with every byte a token
        of its own, a bound on the tokens."""
    def transitions(self, state: int) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """The (token ids, next states) of every token allowed in `state` (ordinary tokens, then a
        structure's special tokens), EOS excluded."""
    def validate(self, text: str | bytes) -> Validation:
        """Does `text` fully match? `Validation.error_offset` is the byte offset where a match
        first becomes impossible (the text's length when it is a valid but incomplete prefix)."""
    def repair(
        self,
        text: str | bytes,
        max_cost: int | None = None,
        deadline_ms: float | None = None,
        *,
        insert_cost: int | None = None,
        delete_cost: int | None = None,
        substitute_cost: int | None = None,
        max_expansions: int | None = None,
        weights: Mapping[str, int] | None = None,
    ) -> RepairResult:
        """The string of the grammar's language closest to `text` under a cost model: by default
        the intent model (its fitted weights overridden by `weights={"name": n}`); any of
        `insert_cost`, `delete_cost`, `substitute_cost` selects plain byte edit distance instead
        (unset ones cost 1). With `deadline_ms` or `max_expansions`, returns the best repair
        found in time with a proven lower bound."""
    @staticmethod
    def repair_weights() -> dict[str, int]:
        """The intent model's frozen default weights, by name (see `repair`)."""
    def build_all(self) -> None:
        """Computes every state's row now, in parallel (the eager build)."""
    def __repr__(self) -> str:
        """`Grammar(num_states=..., vocab_size=...)`."""

class Validation:
    """The answer of `Grammar.validate`: truthy when the text fully matches."""

    @property
    def valid(self) -> bool:
        """True when the text fully matches."""
    @property
    def error_offset(self) -> int | None:
        """Byte offset where a match first becomes impossible; `None` when valid."""
    def __bool__(self) -> bool:
        """`valid`."""
    def __repr__(self) -> str:
        """`Validation(valid=...)`, with the offset when invalid."""

class RepairResult:
    """The answer of `Grammar.repair`."""

    @property
    def status(self) -> Literal["optimal", "anytime", "no_repair_within_max_cost", "not_found"]:
        """"optimal", "anytime" (budget ran out: best found, within `lower_bound` of optimal),
        "no_repair_within_max_cost" or "not_found" (budget ran out before any repair)."""
    @property
    def text(self) -> str | None:
        """The repaired text, or None when there is none."""
    @property
    def cost(self) -> int | None:
        """Sum of the edit costs of `edits`; None when there is no text."""
    @property
    def lower_bound(self) -> int:
        """A proven lower bound on the optimal cost (equal to `cost` when optimal)."""
    @property
    def edits(self) -> list[tuple[Literal["insert", "delete", "substitute"], int, int | None, int | None]]:
        """(kind, offset in the original bytes, old byte or None, new byte or None), in text
        order."""
    @property
    def expansions(self) -> int:
        """Nodes expanded by the search."""
    @property
    def found(self) -> bool:
        """True when a repaired text was found."""
    def __repr__(self) -> str:
        """`RepairResult(status=..., cost=..., lower_bound=..., text=...)`."""

def read_gguf_metadata(path: _Path) -> dict[str, Any]:
    """Reads the metadata of a GGUF file's header into a dict (arrays become lists)."""

def set_compile_nice(nice: int) -> None:
    """Sets the nice value (0 to 19, clamped) grammar compilations and eager index builds run
    at from now on, so that they yield the cores to decoding; 0 runs them on the calling thread
    at its priority. Linux only. The first lowered compilation fixes the value for the process."""

class GrammarError(ValueError):
    """Base class of every grammar core error. An error raised by one part of a structure spec
    also has `structure_path`, the JSON pointer of that part."""

class InvalidRegexError(GrammarError):
    """The regex does not parse; `offset` says where."""

    offset: int

class UnsupportedRegexError(GrammarError):
    """The regex uses a construct a DFA cannot express."""

class GrammarTooLargeError(GrammarError):
    """A DFA or token index exceeds its size limit."""

class EmptyLanguageError(GrammarError):
    """No string matches the grammar."""

class NotCompletableError(GrammarError):
    """No token sequence of this vocabulary completes the grammar."""

class UnsupportedSchemaError(GrammarError):
    """A JSON Schema keyword that is not supported; `keyword` names it, `path` says where."""

    keyword: str
    path: str

class InvalidSchemaError(GrammarError):
    """The JSON Schema is malformed; `path` says where."""

    path: str

class VocabularyError(GrammarError):
    """The tokenizer cannot be read."""

class TokenNotAllowedError(GrammarError):
    """The token is not allowed in this state."""

class InvalidStateError(GrammarError):
    """The state does not belong to this grammar."""

class InvalidStructureError(GrammarError):
    """The structure spec is malformed; `structure_path` says where."""

    structure_path: str

class InvalidGrammarError(GrammarError):
    """The grammar (GBNF, Lark) is malformed; `line`, `column` (1-based, 0 when unknown) and
    `rule` say where."""

    line: int
    column: int
    rule: str | None

def hold_compiles() -> None:
    """Holds compilations running on the lowered-priority pool: each pauses at its next pause
    point until every hold is released (at most a second at a time). Counted: each call needs
    one `release_compiles`."""

def release_compiles() -> None:
    """Ends one `hold_compiles` (a release without a hold does nothing)."""

def compiles_running() -> int:
    """How many compilations are running on the lowered-priority pool now."""
