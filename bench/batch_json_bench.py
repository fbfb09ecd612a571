#!/usr/bin/env python3
"""Where JSON-constrained rows spend a batched step: one sequence against a base revision, and
a batch of constrained rows against a batch of free ones.

Two measurements, greedy, 64 tokens, the prompts of `bench/serve_bench.py` (the order schema of
bench/corpus.py for `json`, a long story for `free`):

- **one sequence, paired with a base revision**: two worker processes, this checkout's engine
  and `--base`'s (extracted as `serve_bench.py` does), each keeps its engine loaded and runs one
  `Engine.chat` per turn; turns alternate, so both see the same machine load. Reports decode
  tok/s per side (median) and the median of the paired ratios.
- **a batch of B sequences** (B from `--batch`, default 1 and 8), driven in this process on a
  `Batch` (no scheduler thread, no HTTP): JSON rows and free rows alternate per repetition.
  Reports aggregate tok/s, steps, rows per step, and seconds per phase of the step (propose,
  forward + verification, commit) from timers around `Generation` methods; with `--profile`,
  the cProfile top functions of the JSON batch.

With `--rows`, instead: the cost of one ragged forward against its rows (1 sequence of 1, 2, 4,
8, 16 rows; 2 and 4 sequences of one row; 8 sequences of 8 to 48 rows, the rows past one a
sequence as drafts come, a round of up to 8 on one sequence before the next), in single-token
forwards, cases interleaved; with `--write-calibration` also the loaded model's entry of
`onyx/decoding/step_cost.json` (the step costs γ is priced with: "cpu" for float32 weights,
"cpu-quantized" for the default quantized ones, `--dtype float32` to measure the former), with
its provenance.

With `--overlap` (CPU), instead: the same forwards (1 and 8 sequences of one row, 8 of three)
with the decoder layers `onyx.cpu.overlap` switched and switched back, alternated, on each model
of `--models`: the time of the overlapped forward against evaluating once at the end.

    python bench/batch_json_bench.py --base 217e64f --reps 6
    python bench/batch_json_bench.py --rows --write-calibration
    python bench/batch_json_bench.py --rows --write-calibration --dtype float32
    python bench/batch_json_bench.py --overlap --models smollm2,gemma3-270m
    python bench/batch_json_bench.py --no-base --batch 8 --profile

Prints the numbers and writes batch_json_bench.json (batch_rows_bench.json with `--rows`,
overlap_bench.json with `--overlap`) to --out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

from bench.corpus import ORDER_SCHEMA_FREE, STORY  # noqa: E402

MAX_TOKENS = 64
JSON_MESSAGES = [{"role": "user", "content": "Write an order as JSON: order ID ORD-1042 for customer Jane Doe "
                                             "(jane@shop.com), who bought 2 notebooks (SKU NB-01) at 3.50 each and "
                                             "1 pen (SKU PN-07) at 1.25."}]
FREE_MESSAGES = [{"role": "user", "content": STORY}]

WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import onyx
from onyx import Engine
eng = Engine()
msgs, schema = json.loads(sys.argv[2]), json.loads(sys.argv[3])
def once():
    t0 = time.perf_counter()
    r = eng.chat(msgs, json_schema=schema, max_tokens=int(sys.argv[4]), temperature=0.0)
    wall = time.perf_counter() - t0
    s = r.stats
    return {"tokens": len(r.token_ids), "decode_s": s.get("decode_s"), "wall_s": wall, "text": r.text,
            "forwards": s.get("target_forwards")}
once()
print("ready", flush=True)
for line in sys.stdin:
    print(json.dumps(once()), flush=True)
"""


def paired_single(base_root: Path, reps: int) -> dict:
    """This checkout's engine against the base revision's, one JSON request per turn, alternating."""
    args = [json.dumps(JSON_MESSAGES), json.dumps(ORDER_SCHEMA_FREE), str(MAX_TOKENS)]
    env = dict(os.environ)
    procs = {}
    for name, root in (("onyx", harness.ROOT), ("base", base_root)):
        procs[name] = subprocess.Popen([sys.executable, "-c", WORKER, str(root), *args], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, env=env, cwd=str(root))
    for p in procs.values():
        assert p.stdout.readline().strip() == "ready"
    runs = {name: [] for name in procs}
    order = list(procs)
    for i in range(reps):
        for name in (order if i % 2 == 0 else order[::-1]):
            p = procs[name]
            p.stdin.write("go\n")
            p.stdin.flush()
            runs[name].append(json.loads(p.stdout.readline()))
    for p in procs.values():
        p.stdin.close()
        p.wait()

    def rate(r):
        return r["tokens"] / r["decode_s"]

    out = {name: {"decode_tok_s": round(statistics.median(rate(r) for r in rs), 2),
                  "wall_tok_s": round(statistics.median(r["tokens"] / r["wall_s"] for r in rs), 2),
                  "tokens": rs[0]["tokens"], "forwards": rs[0]["forwards"], "same_text": len({r["text"] for r in rs}) == 1}
           for name, rs in runs.items()}
    out["ratio_decode"] = round(statistics.median(rate(a) / rate(b) for a, b in zip(runs["onyx"], runs["base"])), 3)
    out["ratio_wall"] = round(statistics.median(b["wall_s"] / a["wall_s"] for a, b in zip(runs["onyx"], runs["base"])), 3)
    out["same_output"] = runs["onyx"][0]["text"] == runs["base"][0]["text"]
    return out


class Phases:
    """Timers around the per-generation phases of a batched step."""

    def __init__(self) -> None:
        from onyx.decoding.generation import Generation

        self.totals = {"propose": 0.0, "check": 0.0, "commit": 0.0}
        self._orig = {}
        for name in self.totals:
            fn = getattr(Generation, name)
            self._orig[name] = fn

            def timed(gen, *a, _fn=fn, _name=name):
                t0 = time.perf_counter()
                try:
                    return _fn(gen, *a)
                finally:
                    self.totals[_name] += time.perf_counter() - t0

            setattr(Generation, name, timed)

    def restore(self) -> None:
        from onyx.decoding.generation import Generation

        for name, fn in self._orig.items():
            setattr(Generation, name, fn)


def run_batch(engine, kind: str, size: int, profile: bool = False) -> dict:
    """`size` sequences of one load on a `Batch` in this thread, until all end."""
    from onyx.decoding.batch import Batch
    from onyx.decoding.generation import Generation
    from onyx.options import GenerateOptions

    if kind == "json":
        options = GenerateOptions.parse(json_schema=ORDER_SCHEMA_FREE, max_tokens=MAX_TOKENS, temperature=0.0)
        ids = engine.chat_ids(JSON_MESSAGES)
    else:
        options = GenerateOptions.parse(max_tokens=MAX_TOKENS, temperature=0.0)
        ids = engine.chat_ids(FREE_MESSAGES)
    batch = Batch(engine.runner)
    gens = []
    for _ in range(size):
        constraint = engine.constraint(options.constraint) if options.constraint is not None else None
        g = Generation(engine.runner, ids, options, constraint=constraint)
        batch.add(g)
        gens.append(g)
    while any(g.phase != "decode" and not g.done for g in gens):  # prompts in (not timed)
        batch.step()
    phases = Phases()
    prof = cProfile.Profile() if profile else None
    steps0, rows0 = batch.steps, sum(len(g.context) for g in gens)
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    try:
        while batch.gens:
            batch.step()
    finally:
        if prof:
            prof.disable()
        phases.restore()
    wall = time.perf_counter() - t0
    engine.runner.pool.materialize()
    tokens = sum(len(g.context) for g in gens) - rows0
    log = [i for i in batch.log if i.index >= steps0]
    out = {"kind": kind, "batch": size, "tokens": tokens, "wall_s": round(wall, 4),
           "agg_tok_s": round(tokens / wall, 2), "steps": len(log),
           "rows_per_step": round(sum(i.rows for i in log) / max(1, len(log)), 2),
           "phases_s": {k: round(v, 4) for k, v in phases.totals.items()},
           "token_ids": [g.context[len(ids):] for g in gens[:1]]}
    out["phases_s"]["other"] = round(wall - sum(phases.totals.values()), 4)
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        out["profile"] = s.getvalue()
    return out


ROW_CASES = [(1, 1), (1, 2), (1, 4), (1, 8), (1, 16), (2, 2), (4, 4), (8, 8), (8, 9), (8, 10), (8, 12), (8, 14), (8, 16), (8, 17), (8, 24),
             (8, 32), (8, 33), (8, 48)]


def _prefilled(engine, n: int) -> tuple[list[int], list]:
    """The JSON prompt's ids, and `n` KV sequences holding all of it but its last token."""
    ids = engine.chat_ids(JSON_MESSAGES)
    seqs = []
    for _ in range(n):
        seq = engine.runner.pool.sequence()
        engine.runner.forward([(seq, ids[:-1], 0)])
        seqs.append(seq)
    return ids, seqs


ROUND_ROWS = 8  # the most rows one sequence's round runs: its pending token and 7 drafts


def rows_per_sequence(nseq: int, rows: int) -> list[int]:
    """How a case's rows are shared among its sequences: a row each, then the rest as drafts
    come in a batch, a whole round on one sequence before the next (the costlier shape: a
    sequence's several rows attend as a block, and a batch's drafts come from the few
    sequences whose drafts are likely to be accepted); a lone sequence takes them all."""
    if nseq == 1:
        return [rows]
    per = [1] * nseq
    extra, i = rows - nseq, 0
    while extra > 0:
        more = min(extra, ROUND_ROWS - per[i]) if i < nseq - 1 else extra
        per[i] += more
        extra -= more
        i += 1
    return per


def forward_costs(engine, reps: int) -> dict:
    """Milliseconds per ragged forward, (sequences, rows) cases round-robin, each sequence's KV
    rolled back after each forward; and each case against one sequence's one-row forward."""
    import mlx.core as mx

    runner = engine.runner
    ids, seqs = _prefilled(engine, max(s for s, _ in ROW_CASES))

    def once(nseq: int, rows: int) -> float:
        per = rows_per_sequence(nseq, rows)
        t0 = time.perf_counter()
        mx.eval(runner.forward([(seqs[i], [ids[-1]] * per[i], per[i]) for i in range(nseq)]))
        dt = time.perf_counter() - t0
        for i in range(nseq):
            seqs[i].rollback(per[i])
        return dt

    for case in ROW_CASES:
        once(*case)
    times = {case: [] for case in ROW_CASES}
    for rep in range(reps):
        for case in (ROW_CASES if rep % 2 == 0 else ROW_CASES[::-1]):
            times[case].append(once(*case))
    for seq in seqs:
        seq.free()
    one = statistics.median(times[(1, 1)])
    return {f"{s}x{r}": {"ms": round(1e3 * statistics.median(t), 1), "vs_one_row": round(statistics.median(t) / one, 2)}
            for (s, r), t in times.items()}


CALIBRATION_ROWS = 64  # the calibration's table reaches this many rows (extrapolated past the cases)


def calibration(costs: dict, model: str = "SmolLM2-135M-Instruct, float32 weights") -> dict:
    """An entry of onyx/decoding/step_cost.json from `forward_costs`: the step cost of R rows
    from the case of min(R, 8) sequences (never below a smaller case's), extended in a straight
    line to `CALIBRATION_ROWS`; the width cost fitted (least squares through 1 at no draft) to
    the lone sequence's cases of at most 1 + 7 rows (an adaptive round's most)."""
    from onyx.cpu.blas import blas_status

    points = [(1, 1.0)] + sorted((r, costs[f"{s}x{r}"]["vs_one_row"]) for s, r in ROW_CASES if r > 1 and s == min(r, 8))
    # A forward over more rows never costs less: a dip is the machine's noise, and would price
    # the rows past it as free.
    points = [(r, max(c for _, c in points[:i + 1])) for i, (r, _) in enumerate(points)]
    (r0, c0), (r1, c1) = points[-2], points[-1]
    if r1 < CALIBRATION_ROWS:
        points.append((CALIBRATION_ROWS, round(c1 + (c1 - c0) * (CALIBRATION_ROWS - r1) / (r1 - r0), 2)))
    lone = [(r - 1, costs[f"1x{r}"]["vs_one_row"] - 1.0) for s, r in ROW_CASES if s == 1 and 1 < r <= 8]
    width = sum(g * c for g, c in lone) / sum(g * g for g, _ in lone)
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=harness.ROOT, capture_output=True,
                            text=True).stdout.strip() or None
    return {"step_cost": [[r, round(c, 2)] for r, c in points], "width_cost": round(width, 3),
            "max_rows": CALIBRATION_ROWS,
            "provenance": {"model": model,
                           "machine": f"{harness.machine_meta()['platform']}, {os.cpu_count()} cores; {blas_status()}",
                           "command": "python bench/batch_json_bench.py --rows --write-calibration",
                           "commit": commit,
                           "note": f"rows 2-{r1} measured (up to eight sequences, the rows past one a sequence as "
                                   f"drafts come); {CALIBRATION_ROWS}: extrapolated"}}


def write_calibration(entry: dict, device: str = "cpu") -> Path:
    """Replaces `device`'s entry (a cost profile, `onyx.decoding.gamma.cost_profile`) of
    onyx/decoding/step_cost.json."""
    from onyx.decoding.gamma import CALIBRATION_FILE

    data = json.loads(CALIBRATION_FILE.read_text())
    data[device] = entry
    text = json.dumps(data, indent=1, ensure_ascii=False)
    # each table on one line, as written by hand: [[rows, cost], ...]
    text = re.sub(r'"step_cost": (\[.*?\n  \])', lambda m: '"step_cost": ' + json.dumps(json.loads(m.group(1))),
                  text, flags=re.S)
    CALIBRATION_FILE.write_text(text + "\n")
    return CALIBRATION_FILE


OVERLAP_CASES = ((1, 1), (8, 1), (8, 3))  # (sequences, rows each)


def overlap_costs(engine, reps: int) -> dict:
    """Per case, the median forward time with `onyx.cpu.overlap`'s layers switched and with them
    switched back (alternated every repetition), and their ratio."""
    import mlx.core as mx

    from onyx.cpu.overlap import decoder_layers, starts_evaluation

    runner = engine.runner
    layers = decoder_layers(runner.model)
    switched = [(layer, type(layer)) for layer in layers if starts_evaluation(layer)]
    if not switched:
        return {}
    ids, seqs = _prefilled(engine, max(s for s, _ in OVERLAP_CASES))

    def use(overlap: bool) -> None:
        for layer, cls in switched:
            layer.__class__ = cls if overlap else cls.__mro__[1]

    def once(nseq: int, rows: int) -> float:
        t0 = time.perf_counter()
        mx.eval(runner.forward([(seqs[i], [ids[-1]] * rows, rows) for i in range(nseq)]))
        dt = time.perf_counter() - t0
        for i in range(nseq):
            seqs[i].rollback(rows)
        return dt

    out = {}
    try:
        for case in OVERLAP_CASES:
            times = {True: [], False: []}
            for overlap in (True, False):
                use(overlap)
                once(*case)
            for rep in range(reps):
                for overlap in ((True, False) if rep % 2 == 0 else (False, True)):
                    use(overlap)
                    times[overlap].append(once(*case))
            on, off = statistics.median(times[True]), statistics.median(times[False])
            out[f"{case[0]}x{case[1]}"] = {"overlapped_ms": round(1e3 * on, 1), "at_the_end_ms": round(1e3 * off, 1),
                                           "ratio": round(on / off, 3)}
    finally:
        use(True)
        for seq in seqs:
            seq.free()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="217e64f", help="revision for the paired one-sequence run")
    ap.add_argument("--no-base", action="store_true")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--rows", action="store_true", help="measure forward cost against rows instead")
    ap.add_argument("--write-calibration", action="store_true",
                    help="with --rows: rewrite the loaded model's profile in onyx/decoding/step_cost.json")
    ap.add_argument("--dtype", default=None, help="with --rows: the weights to load (default: the engine's)")
    ap.add_argument("--overlap", action="store_true", help="measure onyx.cpu.overlap's layers instead (CPU)")
    ap.add_argument("--models", default="smollm2", help="comma-separated models for --overlap")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions (JSON batches)")
    ap.add_argument("--out", type=Path, default=harness.RESULTS)
    args = ap.parse_args()
    result = {"machine": harness.machine_meta(), "loadavg": harness.loadavg()}
    if args.rows:
        from onyx import Engine

        from onyx.decoding.gamma import cost_profile

        engine = Engine(**({"dtype": args.dtype} if args.dtype else {}))
        loaded = engine.runner.loaded
        profile = cost_profile(loaded.device, loaded.dtype)
        result["forward_costs"] = costs = forward_costs(engine, max(args.reps, 5))
        for case, c in costs.items():
            print(f"{case:>6} sequences x rows: {c['ms']:8.1f} ms  {c['vs_one_row']:5.2f}x")
        result["calibration"] = entry = calibration(costs, f"{loaded.name}, {loaded.dtype} weights")
        result["profile"] = profile
        print(f"calibration ({profile}):", json.dumps(entry["step_cost"]), "width cost", entry["width_cost"])
        if args.write_calibration:
            print(f"wrote {write_calibration(entry, profile)}")
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "batch_rows_bench.json").write_text(json.dumps(result, indent=1) + "\n")
        return 0
    if args.overlap:
        from onyx import Engine

        result["overlap"] = {}
        for model in args.models.split(","):
            engine = Engine(model=model)
            result["overlap"][model] = costs = overlap_costs(engine, max(args.reps, 30))
            engine.close()
            for case, c in costs.items():
                print(f"{model:>12} {case:>4} sequences x rows: overlapped {c['overlapped_ms']:7.1f} ms, "
                      f"evaluated at the end {c['at_the_end_ms']:7.1f} ms  {c['ratio']:.3f}x")
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "overlap_bench.json").write_text(json.dumps(result, indent=1) + "\n")
        return 0
    if not args.no_base:
        from bench.serve_bench import base_checkout

        result["single_json"] = single = paired_single(base_checkout(args.base), args.reps)
        print("one sequence, JSON:", json.dumps(single))
    from onyx import Engine

    engine = Engine()
    runs = []
    for size in (int(x) for x in args.batch.split(",")):
        for kind in ("json", "free"):  # warm-up
            run_batch(engine, kind, size)
        per = {"json": [], "free": []}
        for i in range(args.reps):
            for kind in (("json", "free") if i % 2 == 0 else ("free", "json")):
                per[kind].append(run_batch(engine, kind, size, profile=args.profile and kind == "json" and i == 0))
        for kind, rs in per.items():
            best = sorted(rs, key=lambda r: r["agg_tok_s"])[len(rs) // 2]
            if best.get("profile") is None and rs[0].get("profile"):
                best["profile"] = rs[0]["profile"]
            runs.append(best)
            prof = best.pop("profile", None)
            print(json.dumps(best))
            if prof:
                print(prof)
        ratio = statistics.median(a["agg_tok_s"] / b["agg_tok_s"] for a, b in zip(per["json"], per["free"]))
        print(f"batch {size}: json / free aggregate tok/s = {ratio:.3f}")
        runs.append({"batch": size, "json_over_free": round(ratio, 3)})
    result["batches"] = runs
    result["loadavg_end"] = harness.loadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "batch_json_bench.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
