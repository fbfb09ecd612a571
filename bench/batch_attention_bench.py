#!/usr/bin/env python3
"""How to attend over sequences of different lengths in one batched forward: measured.

A batched decoding step runs B sequences at once; each brings its pending token plus its drafts
(a different number of rows per sequence) and has its own context length. Four layouts of the
same step, on the default model (SmolLM2-135M-Instruct, float32), timed as whole forwards (every
weight product, attention, the vocabulary head on the rows that need logits):

    ragged      rows end to end (1, N); weight products once over N rows; attention per
                sequence on its own paged working view (`onyx.kv.ragged`: what Onyx runs)
    padded      a (B, L_max) batch, attention over one persistent left-padded (B, H, T_max, D)
                cache kept across steps (mlx-lm's `BatchKVCache`; its cost when a sequence
                joins or leaves, a rebuild, is not counted here)
    restacked   a (B, L_max) batch whose (B, H, T_max, D) keys and values are stacked from the
                sequences' own working views at every layer of every step
    gathered    a (B, L_max) batch whose keys and values are gathered from the paged pool's
                blocks (block tables) at every layer of every step

Cases: B in 1, 2, 4, 8, 16 sequences with context lengths spread over [150, 900] tokens, and
two row patterns: "decode" (1 row each) and "drafts" (1, 4, 2, 6, 1, 4, ... rows: ragged, as
adaptive drafting gives). Each case runs the layouts round-robin, rolling the KV back after each
forward so every repetition sees the same lengths; the median is reported.

    python bench/batch_attention_bench.py            # about 10 minutes on 2 busy cores
    python bench/batch_attention_bench.py --quick    # B in 1, 4, 8; fewer repetitions

Writes batch_attention_bench.json and .png (ms per forward against B, per layout) to --out.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import time  # noqa: E402

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

DRAFT_ROWS = (1, 4, 2, 6)


def _lengths(b: int) -> list[int]:
    return [int(x) for x in np.linspace(150, 900, b)] if b > 1 else [500]


def _rows(b: int, pattern: str) -> list[int]:
    return [1] * b if pattern == "decode" else [DRAFT_ROWS[i % len(DRAFT_ROWS)] for i in range(b)]


class _StackedCache:
    """One layer of a (B, L) batch whose keys/values come from the sequences' own caches each
    step: stacked from their working views (`gather=False`) or gathered from the pool."""

    def __init__(self, caches, rows: list[int], gather: bool):
        self.caches = caches
        self.rows = rows
        self.gather = gather
        self.starts = [c.offset for c in caches]
        self.offset = mx.array(self.starts)

    def make_mask(self, N, window_size=None, return_array=False):
        t_max = max(o + N for o in self.starts)
        q = mx.array(self.starts)[:, None, None, None] + mx.arange(N)[None, None, :, None]
        k = mx.arange(t_max)[None, None, None, :]
        return k <= q

    def update_and_fetch(self, keys, values):
        L = keys.shape[2]
        ks, vs = [], []
        t_max = max(o + L for o in self.starts)
        for i, (c, n) in enumerate(zip(self.caches, self.rows)):
            k, v = c.update_and_fetch(keys[i:i + 1, :, :n], values[i:i + 1, :, :n])
            if self.gather:  # the rows as the pool's block table would give them
                seq = c._seq
                bs = seq.pool.block_size
                pos = np.arange(k.shape[2])
                table = np.asarray(seq.blocks, dtype=np.int64)
                k, v = seq.pool.take(c.layer, seq.pool.locate(table[pos // bs] * bs + pos % bs))
                k, v = k.transpose(1, 0, 2)[None], v.transpose(1, 0, 2)[None]
            pad = t_max - k.shape[2]
            if pad:
                k = mx.pad(k, [(0, 0), (0, 0), (0, pad), (0, 0)])
                v = mx.pad(v, [(0, 0), (0, 0), (0, pad), (0, 0)])
            ks.append(k)
            vs.append(v)
        return mx.concatenate(ks, axis=0), mx.concatenate(vs, axis=0)


def _padded_tokens(b: int, rows: list[int]) -> mx.array:
    L = max(rows)
    return mx.array([[11 + j for j in range(L)] for _ in range(b)])


def _head_rows(runner, hidden, rows: list[int]) -> mx.array:
    """The vocabulary head on the real rows of a (B, L, D) batch."""
    from onyx.decoding.runner import _head

    L = hidden.shape[1]
    idx = mx.array([i * L + j for i, n in enumerate(rows) for j in range(n)])
    flat = hidden.reshape(1, -1, hidden.shape[-1])[:, idx]
    return _head(runner.model, flat)


def measure(engine, b: int, pattern: str, reps: int) -> dict:
    from mlx_lm.models.cache import BatchKVCache, KVCache

    runner = engine.runner
    pool = runner.pool
    inner = runner.model.model
    lengths, rows = _lengths(b), _rows(b, pattern)
    rng = np.random.default_rng(b)
    prompts = [rng.integers(100, 20000, size=n).tolist() for n in lengths]
    seqs = []
    for p in prompts:
        seq = pool.sequence()
        runner.forward([(seq, p, 0)])
        seqs.append(seq)
    # mlx-lm's persistent padded cache, built once from the same prompts
    kv = []
    for p in prompts:
        caches = [KVCache() for _ in runner.model.layers]
        mx.eval(runner.model(mx.array(p)[None], cache=caches))
        kv.append(caches)
    batch_caches = [BatchKVCache.merge([c[l] for c in kv]) for l in range(len(runner.model.layers))]
    mx.eval([c.keys for c in batch_caches] + [c.values for c in batch_caches])
    del kv
    tokens = [[11 + j for j in range(n)] for n in rows]
    L = max(rows)

    def ragged():
        out = runner.forward([(s, t, len(t)) for s, t in zip(seqs, tokens)])
        mx.eval(out)

    def padded():
        h = inner(_padded_tokens(b, rows), batch_caches)
        mx.eval(_head_rows(runner, h, rows))
        for c in batch_caches:
            c.trim(L)

    def stacked(gather: bool):
        def run():
            caches = [_StackedCache([s.layer_caches()[l] for s in seqs], rows, gather)
                      for l in range(len(runner.model.layers))]
            h = inner(_padded_tokens(b, rows), caches)
            mx.eval(_head_rows(runner, h, rows))
        return run

    layouts = {"ragged": ragged, "padded": padded, "restacked": stacked(False), "gathered": stacked(True)}
    times = {k: [] for k in layouts}
    for _ in range(2):  # warm-up
        for fn in layouts.values():
            fn()
            for s, n in zip(seqs, lengths):
                s.truncate(n)
    for r in range(reps):
        order = list(layouts)[r % len(layouts):] + list(layouts)[:r % len(layouts)]
        for name in order:
            t0 = time.perf_counter()
            layouts[name]()
            times[name].append(time.perf_counter() - t0)
            for s, n in zip(seqs, lengths):
                s.truncate(n)
    for s in seqs:
        s.free()
    del batch_caches
    return {"b": b, "pattern": pattern, "rows": rows, "lengths": lengths, "total_rows": sum(rows),
            "padded_rows": b * L,
            "ms": {k: round(1e3 * harness.median(v), 2) for k, v in times.items()}}


def plot(data, path):
    plt = harness.pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, pattern in zip(axes, ("decode", "drafts")):
        cases = [c for c in data["cases"] if c["pattern"] == pattern]
        for name in ("ragged", "padded", "restacked", "gathered"):
            ax.plot([c["b"] for c in cases], [c["ms"][name] for c in cases], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequences in the forward")
        ax.set_title(f"{pattern} rows")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ms per forward (median)")
    axes[0].legend()
    harness.save_figure(fig, path)
    return True


def main() -> int:
    ap = harness.arg_parser(__doc__, "B in 1, 4, 8 with fewer repetitions")
    args = ap.parse_args()
    import onyx

    engine = onyx.Engine()
    bs = (1, 4, 8) if args.quick else (1, 2, 4, 8, 16)
    reps = 5 if args.quick else 9
    cases = []
    print(f"{'B':>3} {'pattern':>7} {'rows':>5} {'padded':>6}   " + "  ".join(f"{k:>10}" for k in
                                                                     ("ragged", "padded", "restacked", "gathered")))
    for pattern in ("decode", "drafts"):
        for b in bs:
            c = measure(engine, b, pattern, reps)
            cases.append(c)
            print(f"{b:>3} {pattern:>7} {c['total_rows']:>5} {c['padded_rows']:>6}   "
                  + "  ".join(f"{c['ms'][k]:>8.1f}ms" for k in ("ragged", "padded", "restacked", "gathered")),
                  flush=True)
    data = {"bench": "batch_attention", "machine": harness.machine_meta(), "loadavg": harness.loadavg(),
            "cases": cases}
    harness.save_results(harness.out_dir(args.out), "batch_attention_bench", data, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
