"""The decoding loop: prompt → (grammar-masked) tokens, one at a time.

`ModelRunner` is the only code that calls a model: it owns the model's paged KV pool, runs the
prompt (reusing cached prefix blocks) and single steps. `decode` is the loop: at every step the
grammar mask (budget-aware when `max_tokens` bounds the output) is applied to the logits before
temperature, top-k, top-p and min-p; the grammar state advances only on emitted tokens.

Grammar work overlaps the model: the next forward is queued with the sampled token still lazy
(`mx.async_eval`), and only then is the token read back and the grammar advanced, so the CPU
looks up the next mask while the forward runs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

import mlx.core as mx

from onyx.models import LoadedModel
from onyx.paged_cache import PagedKVPool, PagedSequence
from onyx.sampling import MaskCache, Sampler, SamplingParams

PREFILL_CHUNK = 256


class ModelRunner:
    """A loaded model and its paged KV pool."""

    def __init__(self, loaded: LoadedModel, *, block_size: int = 16) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.pool = PagedKVPool.for_model(loaded.model, block_size=block_size)

    def logits(self, tokens: mx.array, seq: PagedSequence, *, last_only: bool = False) -> mx.array:
        """Runs `tokens` (shape (n,)) through the model, appending to `seq`'s KV. Returns float32
        logits (n, V), or (V,) for the last position when `last_only` (the vocabulary head is then
        applied to that position alone, which matters for long prompts)."""
        x = tokens.reshape(1, -1)
        caches = seq.layer_caches()
        inner = getattr(self.model, "model", None)
        if last_only and inner is not None:
            hidden = inner(x, caches)[:, -1:, :]
            out = _head(self.model, hidden)
            return out[0, -1].astype(mx.float32)
        out = self.model(x, cache=caches)[0]
        return (out[-1] if last_only else out).astype(mx.float32)

    def prefill(self, prompt_ids: list[int]) -> tuple[PagedSequence, mx.array, int]:
        """Runs the prompt, reusing cached KV blocks of an earlier prompt with the same prefix.
        Returns the sequence, the last position's logits (evaluated) and the cached token count."""
        seq, cached = self.pool.lookup_prefix(prompt_ids)
        try:
            rest = prompt_ids[cached:]
            logits = None
            for i in range(0, len(rest), PREFILL_CHUNK):
                logits = self.logits(mx.array(rest[i:i + PREFILL_CHUNK]), seq, last_only=True)
                mx.eval(logits)
            self.pool.register_prefix(prompt_ids, seq)
        except BaseException:
            seq.free()
            raise
        return seq, logits, cached


def _head(model, hidden: mx.array) -> mx.array:
    """The vocabulary projection of an mlx-lm model (tied embeddings or `lm_head`)."""
    args = getattr(model, "args", None)
    tied = getattr(model, "tie_word_embeddings", getattr(args, "tie_word_embeddings", False))
    head = getattr(model, "lm_head", None)
    if head is not None and not tied:
        out = head(hidden)
    else:
        out = model.model.embed_tokens.as_linear(hidden)
    softcap = getattr(args, "final_logit_softcapping", None)
    if softcap:
        out = mx.tanh(out / softcap) * softcap
    return out


@dataclass
class DecodeStats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    target_forwards: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        tok_s = self.completion_tokens / self.decode_s if self.decode_s > 0 else 0.0
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prefill_s": round(self.prefill_s, 6),
            "ttft_s": round(self.prefill_s, 6),
            "decode_s": round(self.decode_s, 6),
            "tokens_per_s": round(tok_s, 3),
            "target_forwards": self.target_forwards,
            **{k: v for k, v in self.extra.items() if k != "grammar_state"},
        }


@dataclass
class Finish:
    """The loop's last event: why it stopped, and where the grammar ended."""

    reason: str  # "stop" (EOS, or nothing but EOS left), "length", or "cancelled"
    state: int | None
    stats: DecodeStats


def decode(
    runner: ModelRunner,
    prompt_ids: list[int],
    *,
    grammar=None,
    masks: MaskCache | None = None,
    params: SamplingParams = SamplingParams(),
    max_tokens: int = 256,
    cancel: threading.Event | None = None,
    stats: DecodeStats | None = None,
) -> Iterator[int | Finish]:
    """Yields generated token ids, then a `Finish`. The KV sequence is freed when the generator
    finishes or is closed (a client that goes away frees its blocks)."""
    eos = set(runner.loaded.eos_token_ids)
    if grammar is not None and masks is None:
        masks = MaskCache(grammar, runner.loaded.vocab_size)
    stats = stats if stats is not None else DecodeStats()
    stats.prompt_tokens = len(prompt_ids)
    sampler = Sampler(params)
    t0 = time.perf_counter()
    seq, logits, stats.cached_prompt_tokens = runner.prefill(prompt_ids)
    stats.prefill_s = time.perf_counter() - t0
    stats.target_forwards = 1
    state = grammar.initial_state if grammar is not None else None
    reason = "length"
    t_start = time.perf_counter()
    stats.extra["grammar_state"] = state
    try:
        for i in range(max_tokens):
            if cancel is not None and cancel.is_set():
                reason = "cancelled"
                break
            mask = masks.within(state, max_tokens - i - 1) if grammar is not None else None
            y = sampler.sample(logits, mask)
            # Queue the next forward before reading y back, so the model runs while the CPU
            # advances the grammar and fetches the next mask.
            next_logits = runner.logits(y.reshape(1), seq, last_only=True)
            mx.async_eval(next_logits)
            token = y.item()
            if token in eos:
                reason = "stop"
                break
            if grammar is not None:
                state = grammar.advance(state, token)
                stats.extra["grammar_state"] = state
            stats.completion_tokens += 1
            stats.target_forwards += 1
            yield token
            if grammar is not None and masks.only_eos(state):
                reason = "stop"
                break
            logits = next_logits
        yield Finish(reason, state, stats)
    finally:
        stats.decode_s = time.perf_counter() - t_start
        seq.free()
