#!/usr/bin/env python3
"""Fits the weights of Onyx's default repair cost model (the intent model) on the training corpus.

Coordinate search: starting from the current defaults (`Grammar.repair_weights()`), each weight in
turn is tried at a few multiples of its value, and the value that repairs the most training
cases into their intended value is kept (ties keep the current value, then prefer the cheaper
total cost of the search, measured as node expansions). Rounds repeat until none changes a
weight. Only `bench/data/repair_train.json` is read: the test corpus stays out of the fitting.

    python bench/repair_fit.py              # ~5-10 minutes on a shared 2-core machine
    python bench/repair_fit.py --rounds 1

Prints the best weights as the Rust constant to paste into `IntentWeights::DEFAULT`
(grammar_engine/src/repair/cost.rs), and the training score before and after.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import json  # noqa: E402

from bench import repair_corpus  # noqa: E402

FACTORS = (0.5, 0.75, 1.5, 2.0, 3.0)
DEADLINE_MS = 200.0  # a weight setting that makes the search slow is not one to pick


def score(grammars: dict, cases, weights: dict) -> tuple[int, int]:
    """(cases repaired to their intended value, total node expansions)."""
    hits = expansions = 0
    for c in cases:
        r = grammars[c.schema].repair(c.text, deadline_ms=DEADLINE_MS, weights=weights)
        expansions += r.expansions
        try:
            hits += json.loads(r.text) == c.intended
        except (TypeError, ValueError):
            pass
    return hits, expansions


def fit(grammars: dict, cases, start: dict, rounds: int, log=print) -> dict:
    best = dict(start)
    best_score = score(grammars, cases, best)
    log(f"start: {best_score[0]}/{len(cases)} intended, {best_score[1]} expansions")
    for rnd in range(rounds):
        changed = False
        for name in sorted(best):
            for f in FACTORS:
                value = max(0 if name.startswith("keep_") else 1, round(best[name] * f))
                if value == best[name]:
                    continue
                trial = dict(best, **{name: value})
                s = score(grammars, cases, trial)
                if s[0] > best_score[0] or (s[0] == best_score[0] and s[1] < best_score[1] * 0.9):
                    log(f"  round {rnd}: {name} {best[name]} -> {value}: {s[0]}/{len(cases)} ({s[1]} expansions)")
                    best, best_score, changed = trial, s, True
        if not changed:
            break
    return best


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "one round")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    import onyx
    from onyx.models import assets

    vocab = onyx.Vocabulary.from_gguf(assets.fetch("smollm2"))
    schemas, cases = repair_corpus.load("train")
    grammars = {k: vocab.compile_json_schema(s) for k, s in schemas.items()}
    start = onyx.Grammar.repair_weights()
    best = fit(grammars, cases, start, 1 if args.quick else args.rounds)
    print(json.dumps(best, indent=1))
    print("pub const DEFAULT: IntentWeights = IntentWeights {")
    for k, v in best.items():
        print(f"    {k}: {v},")
    print("};")
    return 0


if __name__ == "__main__":
    sys.exit(main())
