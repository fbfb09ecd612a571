"""Onyx's grammar as a Hugging Face transformers `LogitsProcessor`.

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from onyx.integrations.transformers import GrammarLogitsProcessor

    tokenizer = AutoTokenizer.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")
    model = AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")
    processor = GrammarLogitsProcessor(tokenizer, regex=r"[A-Z]{3}-[0-9]{4}", max_new_tokens=16)
    out = model.generate(**tokenizer("Order ID:", return_tensors="pt"), max_new_tokens=16,
                         logits_processor=[processor])

transformers calls a processor as `processor(input_ids, scores)` before choosing each token:
`input_ids` is `(B, L)`, every row's prompt (padded to one length) and its tokens so far, and
`scores` is `(B, V)`. The first call sees the prompts alone, so its width marks where the
output starts. Each row has its own grammar walk; a later call normally adds one column, which
is read back (B ints) and walked. If rows were reordered (beam search) or the length changed
otherwise, the rows that no longer agree with what was walked are re-read.

Masks are torch bool tensors, one per grammar state, made once from the grammar's bitmask
(numpy, `torch.from_numpy`) on the scores' device and shared by every processor of the same
pattern; a step stacks the rows' masks and fills the forbidden scores with -inf in one call.
With `max_new_tokens` (the same number given to `generate`) the mask is budget-aware, as in
the engine. A processor follows one `generate` call: make a new one per call.

`torch` is an optional dependency (`pip install onyx[torch]`); this module imports it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from onyx.grammar.constraint import Constraint, unpack_bitmask
from onyx.integrations.common import check_budget, compile_constraint, constraint_spec, vocabulary_for

__all__ = ["GrammarLogitsProcessor"]


class GrammarLogitsProcessor(LogitsProcessor):
    """Constrains every row of one `model.generate` call to a regex or a JSON Schema.

    `tokenizer` is the model's own transformers fast tokenizer; `eos_token_ids` overrides the
    EOS ids it declares (give the model's `generation_config.eos_token_id` when it lists more).
    `max_new_tokens`, when given, makes the mask budget-aware. `strict=True` raises on a
    tokenizer self-test mismatch instead of warning. Bad patterns raise subclasses of
    `onyx.GrammarError` here, before generating.
    """

    def __init__(self, tokenizer: Any, *, regex: str | None = None, json_schema: Any = None,
                 max_whitespace: int | None = None, max_new_tokens: int | None = None,
                 eos_token_ids: list[int] | None = None, strict: bool = False) -> None:
        check_budget(max_new_tokens, "max_new_tokens")
        spec = constraint_spec(regex, json_schema, max_whitespace)
        vocab = vocabulary_for(tokenizer, eos_token_ids, strict=strict, stacklevel=3)
        self.compiled = compile_constraint(vocab, spec)
        self.grammar = self.compiled.grammar
        self.max_new_tokens = max_new_tokens
        self.walks: list[Constraint] = []  # one per row
        self._start: int | None = None  # width of `input_ids` at the first call: the prompts
        self._seen: torch.Tensor | None = None  # the generated columns already walked

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        rows, width = input_ids.shape
        if self._start is None:
            self._start = width
            table = self.compiled.table(f"torch:{scores.device}", scores.shape[-1], _forbidden_on(scores.device))
            self.walks = [Constraint(self.compiled, table) for _ in range(rows)]
        elif rows != len(self.walks) or width < self._start:
            raise ValueError(
                f"this processor followed {len(self.walks)} rows from a {self._start}-token prompt and now "
                f"sees {rows} rows of {width} tokens: make one processor per generate call")
        self._advance(input_ids[:, self._start:])
        budget = self.max_new_tokens
        forbidden = torch.stack([w.next_mask(budget) for w in self.walks])
        return scores.masked_fill(forbidden, float("-inf"))

    def _advance(self, generated: torch.Tensor) -> None:
        """Walks every row up to `generated` (B, n): the new column alone when the rows still
        agree with what was walked, else the whole row."""
        seen = self._seen
        n = generated.shape[1]
        if n == 0:
            self._seen = generated
            return
        if seen is not None and n == seen.shape[1] + 1:
            changed = (generated[:, :-1] != seen).any(dim=1).tolist() if seen.shape[1] else [False] * len(self.walks)
            last = generated[:, -1].tolist()
            rows = None
        else:
            changed, last, rows = [True] * len(self.walks), None, generated.tolist()
        for i, walk in enumerate(self.walks):
            if changed[i]:
                walk.sync(rows[i] if rows is not None else generated[i].tolist())
            else:
                walk.advance(last[i])
        self._seen = generated

    # -- the result --------------------------------------------------------------------------

    def matches(self, text: str) -> bool:
        """Does `text` (one row's generated text) fully match the constraint?"""
        return bool(self.grammar.validate(text))


def _forbidden_on(device: torch.device):
    """The conversion of a grammar bitmask into a bool tensor of the *forbidden* tokens on
    `device` (what `masked_fill` takes), made once per state."""

    def convert(words: np.ndarray, width: int) -> torch.Tensor:
        return torch.from_numpy(~unpack_bitmask(words, width)).to(device)

    return convert
