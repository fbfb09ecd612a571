"""Onyx: guaranteed, fast structured output for local LLMs.

The grammar core (`onyx._grammar`, Rust) compiles a regex or JSON Schema against a model's
vocabulary into per-state token bitmasks; see `Vocabulary` and `Grammar`.
"""

from onyx._grammar import (
    EmptyLanguageError,
    Grammar,
    GrammarError,
    GrammarTooLargeError,
    InvalidRegexError,
    InvalidSchemaError,
    InvalidStateError,
    NotCompletableError,
    TokenNotAllowedError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
    Vocabulary,
    VocabularyError,
    read_gguf_metadata,
)
from onyx.tokenizer_check import TokenizerMismatchError, TokenizerMismatchWarning, self_test

__all__ = [
    "EmptyLanguageError",
    "Grammar",
    "GrammarError",
    "GrammarTooLargeError",
    "InvalidRegexError",
    "InvalidSchemaError",
    "InvalidStateError",
    "NotCompletableError",
    "TokenNotAllowedError",
    "UnsupportedRegexError",
    "UnsupportedSchemaError",
    "Vocabulary",
    "VocabularyError",
    "read_gguf_metadata",
    "self_test",
    "TokenizerMismatchError",
    "TokenizerMismatchWarning",
]
