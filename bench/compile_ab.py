#!/usr/bin/env python3
"""Two builds of Onyx's grammar extension compared on JSONSchemaBench compiles, in one process.

The machine's load moves a whole bench run by more than most compile-time changes do, so this
loads both builds of `onyx._grammar` side by side (each with its own vocabulary of SmolLM2's
tokens) and compiles every schema with each in alternation, `--reps` times, keeping each
build's best time (which build goes first alternates from schema to schema too). A repeated
compile finds the schema's small pieces in the process's memo of built regexes: `--reps 1`
times each schema once per build, as the full bench does. Reported per set: both builds' p50 / p99, the geometric mean of the
per-schema ratios B / A, how many schemas compile as a pushdown under each, and how many come
out differently (another restriction, error or pushdown form); with `--walk`, how many
schemas' grammars answer differently along a seeded walk (walks are not timed). Run it with
A = B first: the alternation leaves a bias of a percent or two toward the second build on
small schemas.

    cargo build --release --features python
    cp target/release/libgrammar_engine.so /tmp/b.so      # and the other build to /tmp/a.so
    python bench/compile_ab.py /tmp/a.so /tmp/b.so --step 4
    python bench/compile_ab.py /tmp/a.so /tmp/b.so --step 8 --walk 24   # and the same masks?
    python bench/compile_ab.py /tmp/a.so /tmp/a.so --step 8   # the bias alone

Writes compile_ab.json to --out (default: a temporary folder; not a recorded result).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import argparse  # noqa: E402
import atexit  # noqa: E402
import gzip  # noqa: E402
import hashlib  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.corpus import JSONSCHEMABENCH_DIR, JSONSCHEMABENCH_SETS  # noqa: E402
from onyx.models import assets  # noqa: E402

VOCAB_ASSET = "smollm2"
SLOW_S = 3.0  # a compile this slow is timed once per build


def load_build(path: Path, label: str):
    """The extension module at `path`, loaded beside any other build: from a copy of its own,
    so that the same file can be both builds and a rebuild cannot replace it mid-run."""
    folder = tempfile.mkdtemp(prefix=f"compile-ab-{label}-")
    atexit.register(shutil.rmtree, folder, True)
    copy = Path(folder) / path.name
    shutil.copyfile(path, copy)
    loader = importlib.machinery.ExtensionFileLoader("onyx._grammar", str(copy))
    spec = importlib.util.spec_from_file_location("onyx._grammar", str(copy), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def compile_once(vocab, schema: str) -> tuple[float, list]:
    """Seconds to compile, and what came out: (restriction, pushdown) or the error's class."""
    t0 = time.perf_counter()
    try:
        g = vocab.compile_json_schema(schema)
        outcome = ["ok", g.restriction, g.is_pushdown]
    except Exception as e:  # noqa: BLE001 - a refusal is this schema's result
        outcome = ["error", type(e).__name__]
    return time.perf_counter() - t0, outcome


def walk(vocab, schema: str, tokens: int, seed: int) -> list:
    """What a grammar answers along a seeded walk of `tokens` tokens: at each state a digest of
    its mask and of its mask within a budget of three tokens past the fewest, the fewest tokens
    to an accepted text, and acceptance."""
    g = vocab.compile_json_schema(schema)
    rng = random.Random(seed)
    state, trace = g.initial_state, []
    for _ in range(tokens):
        fewest = g.min_tokens_to_accept(state)
        masks = (g.token_bitmask(state), g.token_bitmask_within(state, fewest + 3))
        trace.append([hashlib.blake2b(m.tobytes(), digest_size=8).hexdigest() for m in masks] + [fewest, g.is_accepting(state)])
        ids = [int(t) for t in g.allowed_token_ids(state) if int(t) not in g.eos_token_ids]
        if not ids:
            break
        state = g.advance(state, ids[rng.randrange(len(ids))])
    return trace


def compare(vocabs, schema: str, reps: int, walk_tokens: int, index: int, turn: int) -> dict:
    """Both builds' best time on `schema`; `turn` decides which goes first in the first round,
    `index` seeds the walk."""
    best = [math.inf, math.inf]
    outcomes: list = [None, None]
    for k in range(reps):
        for i in ((0, 1) if (k + turn) % 2 == 0 else (1, 0)):
            seconds, outcomes[i] = compile_once(vocabs[i], schema)
            best[i] = min(best[i], seconds)
        if min(best) > SLOW_S:
            break
    row = {"a_ms": best[0] * 1e3, "b_ms": best[1] * 1e3, "a": outcomes[0], "b": outcomes[1]}
    if walk_tokens and outcomes[0][0] == outcomes[1][0] == "ok":
        row["walks_agree"] = walk(vocabs[0], schema, walk_tokens, index) == walk(vocabs[1], schema, walk_tokens, index)
    return row


def summarize(rows: list[dict]) -> dict:
    a = np.array([r["a_ms"] for r in rows])
    b = np.array([r["b_ms"] for r in rows])
    return {"schemas": len(rows),
            "a_p50_ms": float(np.percentile(a, 50)), "b_p50_ms": float(np.percentile(b, 50)),
            "a_p99_ms": float(np.percentile(a, 99)), "b_p99_ms": float(np.percentile(b, 99)),
            "geo_ratio_b_over_a": float(math.exp(np.mean(np.log(b / a)))),
            "a_pushdown": sum(r["a"][0] == "ok" and r["a"][2] for r in rows),
            "b_pushdown": sum(r["b"][0] == "ok" and r["b"][2] for r in rows),
            "differ": sum(r["a"] != r["b"] for r in rows),
            "walked": sum("walks_agree" in r for r in rows),
            "walks_differ": sum(r.get("walks_agree") is False for r in rows)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path, help="the first build (a libgrammar_engine.so)")
    p.add_argument("b", type=Path, help="the second build")
    p.add_argument("--sets", default=",".join(JSONSCHEMABENCH_SETS))
    p.add_argument("--step", type=int, default=4, help="every step-th schema of each set (default 4)")
    p.add_argument("--reps", type=int, default=2,
                   help="compiles per build and schema, in alternation (default 2; 1: each schema once per build, "
                        "as the full bench compiles it, which the memo of regexes built in the process does not help)")
    p.add_argument("--walk", type=int, default=0, metavar="TOKENS",
                   help="also walk each schema compiled by both builds this many tokens (seeded by its index) "
                        "and compare every mask, budgeted mask, distance and acceptance on the way")
    p.add_argument("--data", type=Path, default=JSONSCHEMABENCH_DIR)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if args.reps < 1 or args.step < 1:
        raise SystemExit("--reps and --step must be 1 or more")
    gguf = str(assets.asset_path(VOCAB_ASSET))
    vocabs = [load_build(path, label).Vocabulary.from_gguf(gguf, None, None) for path, label in ((args.a, "a"), (args.b, "b"))]
    results: dict[str, list[dict]] = {}
    for name in args.sets.split(","):
        lines = gzip.open(args.data / f"{name}.jsonl.gz").read().splitlines()
        results[name] = []
        for turn, i in enumerate(range(0, len(lines), args.step)):
            schema = json.dumps(json.loads(lines[i])["schema"])
            results[name].append({"index": i, **compare(vocabs, schema, args.reps, args.walk, i, turn)})
        print(f"{name}: {len(results[name])} schemas", file=sys.stderr, flush=True)
    summary = {name: summarize(rows) for name, rows in results.items()}
    summary["all"] = summarize([r for rows in results.values() for r in rows])
    print(f"\nA = {args.a}, B = {args.b}; best of {args.reps}, every {args.step}th schema\n")
    print(f"{'set':16} {'schemas':>7} {'p50 A / B ms':>16} {'p99 A / B ms':>20} {'B/A geo':>8} {'pushdown A / B':>15} {'differ':>6} {'walks differ':>12}")
    for name, s in summary.items():
        print(f"{name:16} {s['schemas']:7d} {s['a_p50_ms']:7.2f} / {s['b_p50_ms']:<6.2f} {s['a_p99_ms']:9.1f} / {s['b_p99_ms']:<8.1f}"
              f" {s['geo_ratio_b_over_a']:8.3f} {s['a_pushdown']:7d} / {s['b_pushdown']:<5d} {s['differ']:6d}"
              f" {str(s['walks_differ']) + ' / ' + str(s['walked']) if s['walked'] else '-':>12}")
    out = harness.out_dir(args.out or Path(tempfile.mkdtemp(prefix="compile-ab-")))
    harness.write_json(out / "compile_ab.json", {"meta": harness.machine_meta(), "a": str(args.a), "b": str(args.b),
                                                 "step": args.step, "reps": args.reps, "summary": summary,
                                                 "schemas": results})
    print(f"\nwrote {out / 'compile_ab.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
