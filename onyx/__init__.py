"""Onyx: guaranteed, fast structured output for local LLMs.

The grammar core (`onyx._grammar`, Rust) compiles a regex or JSON Schema against a model's
vocabulary into per-state token bitmasks; see `Vocabulary` (`onyx/vocabulary.py`: the core's
vocabulary plus the tokenizer self-test) and `Grammar`.
"""

# On Linux, MLX's CPU backend must find OpenBLAS before mlx.core is first imported (it is ~40x
# faster than the bundled reference BLAS on these matrix products); a no-op on macOS.
from onyx.platform import ensure_fast_blas

ensure_fast_blas()

from onyx._grammar import (  # noqa: E402
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
    VocabularyError,
    read_gguf_metadata,
)
from onyx.tokenizer_check import TokenizerMismatchError, TokenizerMismatchWarning, self_test  # noqa: E402
from onyx.vocabulary import Vocabulary  # noqa: E402

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

# The engine pulls in MLX and the model runtime: imported on first use, so `import onyx` stays
# light for grammar-only users.
_ENGINE_NAMES = {"Engine", "Result", "Chunk", "RequestError"}


def __getattr__(name: str):
    if name in _ENGINE_NAMES:
        from onyx import engine

        return getattr(engine, name)
    if name == "ModelError":
        from onyx.models import ModelError

        return ModelError
    raise AttributeError(f"module 'onyx' has no attribute {name!r}")
