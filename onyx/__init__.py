"""Onyx: guaranteed, fast structured output for local LLMs.

The grammar core (`onyx._grammar`, Rust) compiles a regex or JSON Schema against a model's
vocabulary into per-state token bitmasks; see `Vocabulary` (`onyx/grammar/vocabulary.py`: the core's
vocabulary plus the tokenizer self-test) and `Grammar`. `Engine` runs a model under such a
grammar (loaded on first use, so `import onyx` stays light for grammar-only users).
"""

# Nothing here loads MLX or a BLAS: the grammar core is a library other engines import (vLLM,
# transformers). The subpackages that run MLX (`onyx.cpu`, imported first by each of them)
# preload OpenBLAS for MLX's CPU backend on Linux.
from onyx._grammar import Grammar, read_gguf_metadata  # noqa: E402
from onyx.errors import (  # noqa: E402
    CacheFullError,
    EmptyLanguageError,
    GrammarError,
    GrammarTooLargeError,
    InvalidGrammarError,
    InvalidRegexError,
    InvalidSchemaError,
    InvalidStateError,
    InvalidStructureError,
    ModelError,
    NotCompletableError,
    PhiError,
    PhiTooLargeError,
    QueueFullError,
    RequestError,
    TokenNotAllowedError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
    VocabularyError,
)
from onyx.options import ConstraintSpec, GenerateOptions, SamplingParams, Speculation  # noqa: E402
from onyx.grammar.self_test import TokenizerMismatchError, TokenizerMismatchWarning, self_test  # noqa: E402
from onyx.grammar.vocabulary import Vocabulary  # noqa: E402

__all__ = [
    "CacheFullError",
    "Chunk",
    "ConstraintSpec",
    "EmptyLanguageError",
    "Engine",
    "GenerateOptions",
    "Grammar",
    "GrammarError",
    "GrammarTooLargeError",
    "InvalidGrammarError",
    "InvalidRegexError",
    "InvalidSchemaError",
    "InvalidStateError",
    "InvalidStructureError",
    "ModelError",
    "NotCompletableError",
    "PhiError",
    "PhiTooLargeError",
    "QueueFullError",
    "RequestError",
    "Result",
    "SamplingParams",
    "Speculation",
    "TokenNotAllowedError",
    "TokenizerMismatchError",
    "TokenizerMismatchWarning",
    "UnsupportedRegexError",
    "UnsupportedSchemaError",
    "Vocabulary",
    "VocabularyError",
    "read_gguf_metadata",
    "self_test",
]

# The engine pulls in MLX and the model runtime: imported on first use.
_ENGINE_NAMES = {"Engine", "Result", "Chunk"}


def __getattr__(name: str):
    if name in _ENGINE_NAMES:
        from onyx import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'onyx' has no attribute {name!r}")
