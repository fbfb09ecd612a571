"""`onyx.Vocabulary`: the grammar core's vocabulary, checked against the tokenizer it came from.

The Rust extension's `onyx._grammar.Vocabulary` only builds a vocabulary (token id → bytes,
special tokens, EOS ids) and compiles grammars for it. This subclass adds the part that is
Python: a vocabulary built from a tokenizer is checked by the tokenizer self-test
(`onyx.grammar.self_test.self_test`), which warns on a mismatch, or raises
`TokenizerMismatchError` with `strict=True`. Every constructor returns an `onyx.Vocabulary`.

    vocab = Vocabulary.from_hf(tokenizer)                # self-test, warns on a mismatch
    vocab = Vocabulary.from_hf(tokenizer, strict=True)   # raises on a mismatch
    vocab = Vocabulary.from_gguf("model.gguf")           # no tokenizer object to test against
"""

from __future__ import annotations

import os
from typing import Any

from onyx import _grammar
from onyx.grammar.self_test import self_test as _self_test

# The self-test's warning points at the line that called the constructor.
_CALLER = 3


class Vocabulary(_grammar.Vocabulary):
    """A model vocabulary: token id → bytes, special tokens, EOS ids.

    Build one with a `from_*` constructor; `Vocabulary(other)` shares `other`'s tables.
    """

    __slots__ = ()

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        eos_token_ids: list[int] | None = None,
        vocab_size: int | None = None,
        *,
        self_test: bool = True,
        strict: bool = False,
    ) -> Vocabulary:
        """From a Hugging Face fast tokenizer (`transformers`), a `tokenizers.Tokenizer`, or
        mlx-lm's `TokenizerWrapper`. EOS ids come from `eos_token_ids`, else from the tokenizer.
        `vocab_size` pads to the model's logits width. Unless `self_test=False`, the tokenizer
        self-test then checks that its tokens decode to the bytes assumed here (warning on a
        mismatch, or raising with `strict=True`); its result is cached by a hash of the tokenizer.
        """
        vocab = cls(_grammar.Vocabulary.from_hf(tokenizer, eos_token_ids, vocab_size))
        if self_test:
            _self_test(vocab, tokenizer, strict=strict, stacklevel=_CALLER)
        return vocab

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | os.PathLike[str],
        eos_token_ids: list[int] | None = None,
        vocab_size: int | None = None,
        *,
        self_test: bool = True,
        strict: bool = False,
    ) -> Vocabulary:
        """Reads a Hugging Face `tokenizer.json`. EOS ids come from `eos_token_ids`, else from the
        `tokenizer_config.json` / `generation_config.json` / `config.json` next to it, else from
        well-known end-of-turn special tokens. `vocab_size` pads to the model's logits width.
        The self-test runs as for `from_hf`, against the file loaded by `tokenizers`.
        """
        vocab = cls(_grammar.Vocabulary.from_tokenizer_json(path, eos_token_ids, vocab_size))
        if self_test:
            from tokenizers import Tokenizer  # imported on first use: `import onyx` stays light

            tokenizer = Tokenizer.from_file(os.fsdecode(path))
            _self_test(vocab, tokenizer, strict=strict, stacklevel=_CALLER)
        return vocab

    @classmethod
    def from_tokenizer_json_str(
        cls, text: str, eos_token_ids: list[int] | None = None, vocab_size: int | None = None
    ) -> Vocabulary:
        """Same as `from_tokenizer_json`, from the file's text (no self-test: no tokenizer)."""
        return cls(_grammar.Vocabulary.from_tokenizer_json_str(text, eos_token_ids, vocab_size))

    @classmethod
    def from_gguf(
        cls, path: str | os.PathLike[str], eos_token_ids: list[int] | None = None, vocab_size: int | None = None
    ) -> Vocabulary:
        """Reads the tokenizer in a GGUF file's header (the tensors are not read; no self-test)."""
        return cls(_grammar.Vocabulary.from_gguf(path, eos_token_ids, vocab_size))
