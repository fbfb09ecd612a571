#!/usr/bin/env python3
"""Host work per decode step: the part of an engine step that is not the model's forward.

For 1 and 8 sequences and three loads (free text, a regex, a JSON Schema), greedy, one row per
sequence a step (speculative="baseline"), it runs in turn:

- the engine: `Engine.generate_many`, the server's path without HTTP (scheduler, batch, grammar
  masks, sampling, verification, output text). Each step's period is read from the batch's step
  log: from one step's start to the next one's, so the scheduler's work between steps counts;
- the bare loop on the same runner and prompts, right after: the forward of as many rows as each
  of the engine's steps had (steps that fed prompt tokens are left out), a greedy argmax, the
  tokens back to Python, nothing else.

The two are paired step by step (the same width, about the same context lengths). Reported:
the engine's step, the bare step, their paired difference (the host work a step adds to the
forward, to the resolution of the pairing: about a millisecond on this CPU), and the host work
the step log measures exactly, outside the forward and verification (`Batch._run`): proposing
rounds, committing tokens, the scheduler's delivery of text.

    python bench/host_bench.py            # about 4 minutes on 2 cores
    python bench/host_bench.py --quick    # one round, 24 tokens

Prints one table, writes host_bench.json to --out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import threading  # noqa: E402
import time  # noqa: E402

import mlx.core as mx  # noqa: E402

import onyx  # noqa: E402
from bench.corpus import CHARACTER_SCHEMA, JSON_ASK, STORY  # noqa: E402

SEQUENCES = (1, 8)
WORDS = r"[a-zA-Z ,.]+"
# (key, prompt, constraint options)
LOADS = [
    ("free", STORY, {}),
    ("regex", STORY, {"regex": WORDS}),
    ("json", JSON_ASK, {"json_schema": CHARACTER_SCHEMA}),
]


def prompts_for(engine, text: str, n: int) -> list[list[int]]:
    """n chat prompts that differ in their last words (no two share their whole prompt)."""
    return [engine.chat_ids([{"role": "user", "content": f"{text} (Version {i + 1}.)"}]) for i in range(n)]


def engine_steps(engine, prompts: list[list[int]], options: dict, max_tokens: int) -> list[tuple[int, float, float, float]]:
    """(sequences, period, step seconds, forward-and-verification seconds) of each step in which
    every sequence in the forward decoded one row (no prompt tokens), in order."""
    batch = engine.scheduler.batch
    first = batch.steps
    engine.generate_many(prompts, max_tokens=max_tokens, temperature=0.0, speculative="baseline", **options)
    log = [s for s in batch.log if s.index >= first]
    out = []
    for a, b in zip(log, log[1:]):
        if b.index == a.index + 1 and a.sequences == a.rows == a.logit_rows and a.prefill_tokens == 0:
            out.append((a.sequences, b.started - a.started, a.seconds, a.run_seconds))
    return out


def settle(timeout: float = 10.0) -> None:
    """Waits for the engine's background work to end (KV view arrays filled on their own
    threads, grammar compilations), so that neither side of a pair runs beside it."""
    from onyx._grammar import compiles_running

    deadline = time.time() + timeout
    while time.time() < deadline and (compiles_running() or any(
            t.name.startswith("onyx-kv-views") for t in threading.enumerate())):
        time.sleep(0.01)


def bare_steps(runner, prompts: list[list[int]], widths: list[int]) -> list[float]:
    """Seconds of each step of the bare loop (forward, argmax, tokens to Python), step i over
    the first `widths[i]` sequences, as the engine's steps had them."""
    seqs, tokens = [], []
    try:
        for ids in prompts:
            seq, logits, _ = runner.prefill(ids)
            seqs.append(seq)
            tokens.append(int(mx.argmax(logits).item()))
        times = []
        for k in widths:
            t0 = time.perf_counter()
            logits = runner.forward([(s, [t], 1) for s, t in zip(seqs[:k], tokens)])
            mx.async_eval(logits)  # as the engine's step: the forward starts before argmax is built
            tokens[:k] = mx.argmax(logits, axis=-1).tolist()
            times.append(time.perf_counter() - t0)
        return times
    finally:
        for s in seqs:
            s.free()


def run(quick: bool = False, out_dir: Path | None = None, *, max_tokens: int | None = None,
        rounds: int | None = None) -> dict:
    t_start = time.perf_counter()
    max_tokens = max_tokens or (24 if quick else 64)
    rounds = rounds or (1 if quick else 3)
    meta = harness.machine_meta() | {"quick": quick, "max_tokens": max_tokens, "rounds": rounds,
                                     "loadavg_start": harness.loadavg()}
    engine = onyx.Engine()
    configs = [(n, key, text, opts) for n in SEQUENCES for key, text, opts in LOADS]
    prompts = {(n, key): prompts_for(engine, text, n) for n, key, text, _ in configs}
    for n, key, _, opts in configs:  # warm-up: grammars compiled, masks and prefixes cached
        engine_steps(engine, prompts[n, key], opts, 8)
    pairs: dict = {(n, key): [] for n, key, _, _ in configs}
    rows_fed: dict = {(n, key): [] for n, key, _, _ in configs}
    for rnd in range(rounds):
        for n, key, _, opts in (configs if rnd % 2 == 0 else configs[::-1]):
            ps = prompts[n, key]
            settle()
            eng = engine_steps(engine, ps, opts, max_tokens)
            settle()
            bare = bare_steps(engine.runner, ps, [e[0] for e in eng])
            pairs[n, key].extend((e[1:], b) for e, b in zip(eng, bare))
            rows_fed[n, key].extend(e[0] for e in eng)
        print(f"round {rnd + 1}/{rounds} done", flush=True)

    rows, results = [], []
    for n, key, _, _ in configs:
        ps = pairs[n, key]
        period = harness.median([e[0] for e, _ in ps])
        bare = harness.median([b for _, b in ps])
        host = harness.median([e[0] - b for e, b in ps])
        outside = harness.median([e[0] - e[2] for e, _ in ps])
        r = {"sequences": n, "load": key, "steps": len(ps),
             "mean_rows": round(sum(rows_fed[n, key]) / max(len(rows_fed[n, key]), 1), 2),
             "engine_step_ms": round(1e3 * period, 2),
             "bare_step_ms": round(1e3 * bare, 2), "engine_minus_bare_ms": round(1e3 * host, 2),
             "outside_forward_ms": round(1e3 * outside, 2),
             "outside_share": round(outside / period, 4) if period else None}
        results.append(r)
        rows.append((n, key, r["steps"], r["mean_rows"], r["engine_step_ms"], r["bare_step_ms"],
                     r["engine_minus_bare_ms"], r["outside_forward_ms"], f"{100 * r['outside_share']:.1f}%"))
    header = ("seqs", "load", "steps", "rows", "engine ms", "bare ms", "engine - bare ms", "outside ms",
              "outside share")
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(c) for c in row))
    meta["loadavg_end"] = harness.loadavg()
    meta["wall_s"] = round(time.perf_counter() - t_start, 1)
    res = {"meta": meta, "model": {"name": engine.loaded.name, "dtype": engine.loaded.dtype,
                                   "device": engine.loaded.device},
           "loads": {key: opts for key, _, opts in LOADS}, "results": results}
    harness.save_results(Path(out_dir) if out_dir is not None else harness.RESULTS, "host_bench", res)
    return res


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "one round of 24 tokens (smoke test)")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    a = ap.parse_args(argv)
    if argv is None:  # run as a script
        harness.start_like_a_server()
    run(a.quick, a.out, max_tokens=a.max_tokens, rounds=a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
