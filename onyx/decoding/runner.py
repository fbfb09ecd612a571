"""`ModelRunner`: the only code that calls a model.

It owns the model's paged KV pool, runs a prompt (reusing the cached KV blocks of an earlier
prompt with the same prefix, in chunks) and runs token rows through the model, appending to a
sequence's KV: one sequence's rows (`logits`), or the rows of several sequences in one forward
(`forward`, a ragged batch: `onyx.kv.ragged`). Rolling a sequence back is the pool's job
(`PagedSequence.rollback`, O(1)).
"""

from __future__ import annotations

import mlx.core as mx
from mlx.utils import tree_flatten

from onyx.kv import ragged
from onyx.models.loader import LoadedModel
from onyx.kv.pool import PagedKVPool, PagedSequence

PREFILL_CHUNK = 256


class ModelRunner:
    """A loaded model and its paged KV pool."""

    def __init__(self, loaded: LoadedModel, *, block_size: int = 16) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.pool = PagedKVPool.for_model(loaded.model, block_size=block_size)
        # Bytes of weights one decode step reads: the relative cost of a step (decoding is
        # memory-bound), used to price a draft model's steps against the target's.
        self.weight_bytes = sum(v.nbytes for _, v in tree_flatten(loaded.model.parameters()))
        # Several sequences in one forward (else `forward` runs them one after the other).
        self.ragged = ragged.install(loaded.model)

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

    def forward(self, segments: list[tuple[PagedSequence, list[int], int]]) -> mx.array | None:
        """One forward over the rows of several sequences: each (seq, tokens, k) appends `tokens`
        to `seq`'s KV and wants logits for its last k rows. Returns the float32 logits of those
        rows, segment after segment, shape (sum k, V), not yet evaluated; or None when no row
        wants logits (the forward, a prompt chunk, has then been evaluated).

        The weight products run once over all rows; attention is batched over the sequences'
        view slots (`onyx.kv.ragged`). A model whose architecture the ragged path does not
        know runs the segments one by one instead, each evaluated before the next writes into
        the shared view arrays (a pending reader would make MLX copy them)."""
        inner = getattr(self.model, "model", None)
        if not self.ragged or inner is None or len(segments) == 1:
            outs = []
            for seq, tokens, k in segments:
                outs.append(self._rows(seq, tokens, k))
                if len(segments) > 1 and outs[-1] is not None:
                    mx.eval(outs[-1])
            return _join(outs)
        seqs = [s for s, _, _ in segments]
        lengths = [len(t) for _, t, _ in segments]
        caches = ragged.layer_caches(seqs, lengths)
        x = mx.array([t for _, tokens, _ in segments for t in tokens]).reshape(1, -1)
        hidden = inner(x, caches)
        want, end = [], 0
        for n, (_, _, k) in zip(lengths, segments):
            end += n
            want.extend(range(end - k, end))
        if not want:
            mx.eval(hidden)
            return None
        rows = hidden[:, mx.array(want)] if len(want) < end else hidden
        return _head(self.model, rows)[0].astype(mx.float32)

    def _rows(self, seq: PagedSequence, tokens: list[int], k: int) -> mx.array | None:
        """One sequence's forward, logits for its last k rows (None when k is 0: evaluated)."""
        x = mx.array(tokens).reshape(1, -1)
        caches = seq.layer_caches()
        inner = getattr(self.model, "model", None)
        if inner is None:
            out = self.model(x, cache=caches)[0]
            if k == 0:
                mx.eval(out)
                return None
            return out[len(tokens) - k:].astype(mx.float32)
        hidden = inner(x, caches)
        if k == 0:
            mx.eval(hidden)
            return None
        if k < len(tokens):
            hidden = hidden[:, len(tokens) - k:, :]
        return _head(self.model, hidden)[0].astype(mx.float32)

    def prefill(self, prompt_ids: list[int], *, leave_last: bool = True) -> tuple[PagedSequence, mx.array | None, int]:
        """Runs the prompt, reusing cached KV blocks of an earlier prompt with the same prefix.
        Returns the sequence, the last position's logits (evaluated; None when every token was
        cached and `leave_last` is False) and the cached token count."""
        seq, cached = self.pool.lookup_prefix(prompt_ids, leave_last=leave_last)
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


def _join(outs: list[mx.array | None]) -> mx.array | None:
    outs = [o for o in outs if o is not None]
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=0)


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
