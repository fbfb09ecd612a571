"""Onyx's grammar as an mlx-lm logits processor.

    from mlx_lm import generate, load
    from onyx.integrations.mlx_lm import GrammarLogitsProcessor

    model, tokenizer = load("mlx-community/Qwen2.5-0.5B-Instruct-4bit")
    processor = GrammarLogitsProcessor(tokenizer, regex=r"[A-Z]{3}-[0-9]{4}", max_tokens=16)
    text = generate(model, tokenizer, "Order ID:", max_tokens=16, logits_processors=[processor])

mlx-lm calls a processor as `processor(tokens, logits)` before sampling each token: `tokens`
is a 1-D array of every token so far, the prompt included, and `logits` is `(1, V)`. The first
call sees the prompt alone, so its length marks where the output starts; each later call
normally adds one token (the one just sampled), which is read back and walked through the
grammar. Any other change of length (mlx-lm's speculative decoding rewinds) re-reads the output
and keeps the part of the walk that still agrees. The logits of tokens the grammar forbids are
set to -inf, before mlx-lm's sampler applies temperature, top-p and the rest (the engine's
order).

A processor holds one sequence's state: make one per `generate` call, and one per sequence in a
`BatchGenerator` (`insert(..., logits_processors=[[p1], [p2], ...])`). Making one is cheap: the
vocabulary is built once per tokenizer (with the tokenizer self-test) and the grammar compiled
once per pattern. With `max_tokens` (the same number given to mlx-lm) the mask is budget-aware,
as in the engine: a token is allowed only if a valid completion still fits in the tokens left.
"""

from __future__ import annotations

from typing import Any

import onyx.cpu  # noqa: F401,I001 - OpenBLAS preloaded before MLX (Linux)
import mlx.core as mx

from onyx.decoding.sampling import mask_to_mlx
from onyx.grammar.constraint import Constraint
from onyx.integrations.common import check_budget, compile_constraint, constraint_spec, vocabulary_for

__all__ = ["GrammarLogitsProcessor"]

NEG_INF = float("-inf")


def _bias_of(dtype):
    """The conversion of a grammar bitmask into an additive mask in the logits' dtype: 0 where
    a token is allowed, -inf where not (one add per step: cheaper than a select on the CPU)."""

    def convert(words, width: int) -> mx.array:
        bias = mx.where(mask_to_mlx(words, width), 0.0, NEG_INF).astype(dtype)
        mx.eval(bias)
        return bias

    return convert


class GrammarLogitsProcessor:
    """Constrains one mlx-lm generation to a regex or a JSON Schema.

    `tokenizer` is the model's own (mlx-lm's `TokenizerWrapper`, or a transformers fast
    tokenizer); `eos_token_ids` overrides the EOS ids it declares. `max_tokens`, when given,
    makes the mask budget-aware. `strict=True` raises on a tokenizer self-test mismatch instead
    of warning. Bad patterns raise subclasses of `onyx.GrammarError` here, before generating.
    """

    def __init__(self, tokenizer: Any, *, regex: str | None = None, json_schema: Any = None,
                 max_whitespace: int | None = None, max_tokens: int | None = None,
                 eos_token_ids: list[int] | None = None, strict: bool = False) -> None:
        check_budget(max_tokens, "max_tokens")
        spec = constraint_spec(regex, json_schema, max_whitespace)
        vocab = vocabulary_for(tokenizer, eos_token_ids, strict=strict, stacklevel=3)
        self.compiled = compile_constraint(vocab, spec)
        self.grammar = self.compiled.grammar
        self.max_tokens = max_tokens
        self.walk = Constraint(self.compiled)  # its masks are chosen at the first call (dtype, width)
        self._start: int | None = None  # length of `tokens` at the first call: the prompt

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if tokens.ndim != 1:
            tokens = tokens.reshape(-1)
        total = tokens.size
        if self._start is None:
            self._start = total
            self.walk.masks = self.compiled.table(f"mlx:{logits.dtype}", logits.shape[-1], _bias_of(logits.dtype))
        walk = self.walk
        produced = total - self._start
        seen = len(walk.tokens)
        if produced == seen + 1:  # the usual step: one token more
            walk.advance(tokens[-1].item())
        elif produced != seen or (seen and tokens[-1].item() != walk.tokens[-1]):
            self._resync(tokens, produced)
        return logits + walk.next_mask(self.max_tokens)

    def _resync(self, tokens: mx.array, produced: int) -> None:
        if produced < 0:
            raise ValueError(
                f"this processor saw a {self._start}-token prompt, and now {tokens.size} tokens: a "
                "processor follows one sequence; make one per generate call and per batch sequence")
        self.walk.sync(tokens[self._start:].tolist())

    # -- the result --------------------------------------------------------------------------

    @property
    def state(self) -> int:
        """The grammar state after the tokens seen so far (the last sampled token is seen only
        by the next call)."""
        return self.walk.state

    def reset(self) -> None:
        """Forgets the sequence: the processor can serve a new generation."""
        self.walk = self.walk.fresh()
        self._start = None

    def matches(self, text: str) -> bool:
        """Does `text` (the generated text) fully match the constraint?"""
        return bool(self.grammar.validate(text))
