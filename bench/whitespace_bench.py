#!/usr/bin/env python3
"""Which JSON whitespace default keeps the model's own choices best?

On the default model, for the chat prompts with a schema of `bench/corpus.py` (`JSON_TASKS`),
the engine's public API (`Engine.chat_many`, greedy) answers every prompt under each setting:

    free        no constraint (the reference: what the model writes on its own)
    ws=0        compact JSON, no whitespace between tokens (Onyx's current default)
    ws=N        at most N whitespace characters wherever JSON allows whitespace: ws=1 is the
                smallest bound that allows `{"a": 1}`; a newline and two-space indentation at
                depth d takes 2d + 1

Every output (its tokens, plus the end-of-sequence token when the model stopped) is then scored
by the same model without a constraint, teacher-forced after the same prompt:

- mean log-prob: the mean over the output's tokens of their log-probability (higher: closer to
  what the model wanted to write), averaged over the tasks; also its task-by-task difference
  from ws=0, and on how many tasks the setting is ahead / behind;
- total log-prob: the log-probability of the whole output (its sum);
- changed: the share of positions where the unconstrained argmax is not the token written
  (for greedy output: where the constraint overrode the model's choice).

And per output: validity (parsed strictly, validated by `jsonschema` with format checking),
tokens, model forwards, the share of whitespace-only tokens, the longest whitespace run, and
whitespace loops (the whole token budget used, at least half of the last 32 tokens whitespace).
Per setting, the task grammars' states and compile time; optionally (`--schema-sample N`) the
first N schemas of every JSONSchemaBench set compiled by the grammar core at each setting.

The recommendation: among bounded settings with every output valid and no loop, the smallest
whose total log-prob per output is within `--tolerance` of the best (more whitespace costs
tokens and states, so a larger bound must earn its place). The total, not the per-token mean:
whitespace tokens are nearly free under the model, so a mean rises with every whitespace token
added even where the words written are the same or worse.

    python bench/whitespace_bench.py                       # 30 tasks, 200 tokens
    python bench/whitespace_bench.py --quick --out /tmp/wb # 2 tasks, 48 tokens (smoke test)

Prints one table, writes whitespace_bench.json to --out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import json  # noqa: E402
import time  # noqa: E402

import jsonschema  # noqa: E402
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from bench.corpus import JSON_TASKS  # noqa: E402

SETTINGS = "0,1,2,4,8,16"
QUICK_TASKS = ("person", "tool_args")
LOOP_WINDOW = 32  # the last tokens a whitespace loop is judged on
TOLERANCE = 1.0  # nats per output: differences below this are treated as a tie


def setting_name(ws: int | None) -> str:
    return "free" if ws is None else f"ws={ws}"


# -- scoring one output --------------------------------------------------------------------------


def score(engine, prompt: list[int], tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Teacher-forced, unconstrained: each token's log-probability after the prompt and the
    tokens before it, and the model's argmax at each of those positions."""
    logits = engine.loaded.model(mx.array(prompt + tokens)[None])[0, len(prompt) - 1:-1].astype(mx.float32)
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    chosen = mx.take_along_axis(logprobs, mx.array(tokens)[:, None], axis=-1)[:, 0]
    best = mx.argmax(logits, axis=-1)
    mx.eval(chosen, best)
    return np.array(chosen), np.array(best)


def valid(text: str, schema: dict) -> bool:
    """The whole text is one JSON value that the schema accepts (formats checked)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(value)


def longest_whitespace_run(text: str) -> int:
    best = run = 0
    for c in text:
        run = run + 1 if c in " \t\n\r" else 0
        best = max(best, run)
    return best


def measure(engine, prompt: list[int], schema: dict, result, max_tokens: int) -> dict:
    tokens = list(result.token_ids)
    scored = tokens + ([engine.loaded.eos_token_ids[0]] if result.finish_reason == "stop" else [])
    lp, best = score(engine, prompt, scored)
    blank = [not engine.vocab.token_bytes(t).strip() for t in tokens]
    used_budget = len(tokens) >= max_tokens
    tail = blank[-LOOP_WINDOW:]
    return {
        "text": result.text, "finish_reason": result.finish_reason, "tokens": len(tokens),
        "forwards": result.stats.get("target_forwards"), "scored_tokens": len(scored),
        "mean_logprob": float(lp.mean()), "sum_logprob": float(lp.sum()),
        "argmax_changed": int(sum(int(b) != t for b, t in zip(best, scored))),
        "valid": valid(result.text, schema), "whitespace_tokens": int(sum(blank)),
        "longest_whitespace_run": longest_whitespace_run(result.text), "used_budget": used_budget,
        "whitespace_loop": used_budget and sum(tail) * 2 >= len(tail),
    }


# -- summaries -----------------------------------------------------------------------------------


def summarize(outputs: list[dict], compact: list[dict] | None) -> dict:
    """Means over one setting's outputs, and task-by-task differences from ws=0's."""
    positions = sum(o["scored_tokens"] for o in outputs)
    s = {
        "outputs": len(outputs),
        "valid": sum(o["valid"] for o in outputs) / len(outputs),
        "mean_logprob": float(np.mean([o["mean_logprob"] for o in outputs])),
        "sum_logprob": float(np.mean([o["sum_logprob"] for o in outputs])),
        "tokens": float(np.mean([o["tokens"] for o in outputs])),
        "forwards": float(np.mean([o["forwards"] for o in outputs])),
        "argmax_changed": sum(o["argmax_changed"] for o in outputs) / positions,
        "whitespace_share": sum(o["whitespace_tokens"] for o in outputs) / max(1, sum(o["tokens"] for o in outputs)),
        "longest_whitespace_run": max(o["longest_whitespace_run"] for o in outputs),
        "used_budget": sum(o["used_budget"] for o in outputs),
        "whitespace_loops": sum(o["whitespace_loop"] for o in outputs),
    }
    if compact is not None:
        diffs = [o["mean_logprob"] - c["mean_logprob"] for o, c in zip(outputs, compact)]
        s["vs_compact"] = {"mean_logprob_diff": float(np.mean(diffs)), "ahead": sum(d > 0 for d in diffs),
                           "behind": sum(d < 0 for d in diffs),
                           "tokens_ratio": s["tokens"] / float(np.mean([c["tokens"] for c in compact]))}
    return s


def recommend(summary: dict, tolerance: float) -> dict:
    """Among bounded settings with every output valid and no whitespace loop, the smallest bound
    whose total log-prob per output is within `tolerance` of the best of them."""
    eligible = sorted((int(k.split("=")[1]) for k, s in summary.items()
                       if k != "free" and s["valid"] == 1.0 and s["whitespace_loops"] == 0))
    best = max((summary[f"ws={w}"]["sum_logprob"] for w in eligible), default=None)
    pick = next((w for w in eligible if summary[f"ws={w}"]["sum_logprob"] >= best - tolerance), None)
    return {"max_whitespace": pick, "eligible": [f"ws={w}" for w in eligible], "tolerance": tolerance,
            "rule": f"the smallest bound within {tolerance} nats per output of the best total log-prob, among "
                    "bounded settings with every output valid and no whitespace loop"}


# -- compile cost on real-world schemas ----------------------------------------------------------


def schema_sample(vocab, limit: int, settings: list[int]) -> dict | None:
    """The first `limit` schemas of every JSONSchemaBench set, compiled by the grammar core at
    each setting: how many compile, how many under a restriction, the summed compile time and
    states. None when the data is missing."""
    from bench.corpus import JSONSCHEMABENCH_DIR, JSONSCHEMABENCH_SETS
    from bench.schema_walks import load_set

    if not all((JSONSCHEMABENCH_DIR / f"{n}.jsonl.gz").exists() for n in JSONSCHEMABENCH_SETS):
        return None
    cases = [schema for n in JSONSCHEMABENCH_SETS for _file, schema in load_set(n, limit=limit)]
    out = {}
    for ws in settings:
        compiled = restricted = states = 0
        start = time.perf_counter()
        for schema in cases:
            try:
                grammar = vocab.compile_json_schema(schema if isinstance(schema, str) else json.dumps(schema),
                                                    max_whitespace=ws)
            except Exception:  # noqa: BLE001 - a refusal is counted, whatever its kind
                continue
            compiled += 1
            restricted += grammar.restriction is not None
            states += grammar.num_states
        out[setting_name(ws)] = {"schemas": len(cases), "compiled": compiled, "restricted": restricted,
                                 "states": states, "compile_s": time.perf_counter() - start}
    return {"per_set": limit, "settings": out}


# -- the run -------------------------------------------------------------------------------------


def run(args) -> dict:
    from onyx import Engine

    tasks = [(k, [{"role": "user", "content": p}], s) for k, p, s in JSON_TASKS]
    keys = args.tasks.split(",") if args.tasks else QUICK_TASKS if args.quick else None
    tasks = [t for t in tasks if keys is None or t[0] in keys]
    max_tokens = args.max_tokens or (48 if args.quick else 200)
    bounds = sorted({int(x) for x in args.settings.split(",")} | {0})
    settings: list[int | None] = [None, *bounds]
    load_before = harness.loadavg()
    engine = Engine()
    print(f"model {engine.model_name}, {len(tasks)} tasks, max_tokens {max_tokens}, settings "
          f"{', '.join(map(setting_name, settings))}", flush=True)
    prompts = [engine.chat_ids(messages) for _k, messages, _s in tasks]

    grammars, outputs = {}, {}
    for ws in bounds:  # compiled before decoding, so the decoding finds them cached
        start = time.perf_counter()
        states = sum(engine.compile(json_schema=s, max_whitespace=ws).num_states for _k, _m, s in tasks)
        grammars[setting_name(ws)] = {"states": states, "compile_s": time.perf_counter() - start}
    for ws in settings:
        constraint = (lambda s: {}) if ws is None else (lambda s: {"json_schema": s, "max_whitespace": ws})
        start = time.perf_counter()
        results = engine.chat_many([m for _k, m, _s in tasks],
                                   [constraint(s) | {"temperature": 0.0, "max_tokens": max_tokens}
                                    for _k, _m, s in tasks])
        wall = time.perf_counter() - start
        outputs[setting_name(ws)] = [{"task": k, **measure(engine, p, s, r, max_tokens)}
                                     for (k, _m, s), p, r in zip(tasks, prompts, results)]
        print(f"  {setting_name(ws):5} {wall:6.1f} s", flush=True)

    summary = {name: summarize(outs, outputs["ws=0"] if name != "ws=0" else None) for name, outs in outputs.items()}
    sample = None
    if args.schema_sample:
        print(f"compiling the first {args.schema_sample} schemas of each JSONSchemaBench set", flush=True)
        sample = schema_sample(engine.vocab, args.schema_sample, bounds)
    data = {
        "meta": {**harness.machine_meta(), "quick": args.quick, "model": engine.model_name,
                 "max_tokens": max_tokens, "tasks": [k for k, _m, _s in tasks],
                 "settings": list(map(setting_name, settings)),
                 "loadavg_before_after": [load_before, harness.loadavg()],
                 "versions": {p: harness.package_version(p) for p in ("mlx", "jsonschema")}},
        "summary": summary,
        "recommended": recommend(summary, args.tolerance),
        "grammars": grammars,
        "schema_sample": sample,
        "outputs": outputs,
    }
    engine.close()
    print_table(data)
    harness.save_results(harness.out_dir(args.out), "whitespace_bench", data)
    return data


def print_table(data: dict) -> None:
    meta = data["meta"]
    print(f"\n{len(meta['tasks'])} tasks, greedy, max_tokens {meta['max_tokens']}. lp: log-prob per token under the "
          "unconstrained model (higher: nearer the model's own choices); Δ ws=0: task by task (ahead/behind)")
    print(f"{'setting':7} {'valid':>6} {'mean lp':>8} {'Δ ws=0':>7} {'ahd/bhd':>7} {'sum lp':>8} {'tokens':>7} "
          f"{'× ws=0':>6} {'fwds':>6} {'changed':>8} {'ws tok':>7} {'ws run':>6} {'budget':>6} {'loops':>5}")
    for name, s in data["summary"].items():
        vs = s.get("vs_compact")
        diff, sides, ratio = (f"{vs['mean_logprob_diff']:+.3f}", f"{vs['ahead']}/{vs['behind']}",
                              f"{vs['tokens_ratio']:.2f}") if vs else ("-", "-", "-")
        print(f"{name:7} {s['valid']:6.0%} {s['mean_logprob']:8.3f} {diff:>7} {sides:>7} {s['sum_logprob']:8.1f} "
              f"{s['tokens']:7.1f} {ratio:>6} {s['forwards']:6.1f} {s['argmax_changed']:8.1%} "
              f"{s['whitespace_share']:7.1%} {s['longest_whitespace_run']:6d} {s['used_budget']:6d} "
              f"{s['whitespace_loops']:5d}")
    print("task grammars (summed): " + "; ".join(f"{k} {g['states']:,} states, {g['compile_s'] * 1e3:.0f} ms"
                                                 for k, g in data["grammars"].items()))
    sample = data.get("schema_sample")
    if sample:
        print(f"JSONSchemaBench, first {sample['per_set']} schemas per set: " + "; ".join(
            f"{k} {c['compiled']}/{c['schemas']} compiled ({c['restricted']} restricted), {c['states']:,} states, "
            f"{c['compile_s']:.1f} s" for k, c in sample["settings"].items()))
    r = data["recommended"]
    print(f"\nrecommended default: max_whitespace={r['max_whitespace']} ({r['rule']}); eligible: "
          f"{', '.join(r['eligible']) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    ap = harness.arg_parser(__doc__, f"tasks {', '.join(QUICK_TASKS)}, 48 tokens (smoke test)")
    ap.add_argument("--tasks", default=None, help="comma-separated task keys (default: all, or the quick ones)")
    ap.add_argument("--settings", default=SETTINGS, help=f"max_whitespace values, 0 always included ({SETTINGS})")
    ap.add_argument("--max-tokens", type=int, default=None, help="per output (default 200; 48 with --quick)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE, help="of the recommendation, nats per output")
    ap.add_argument("--schema-sample", type=int, default=0, metavar="N",
                    help="also compile the first N schemas of every JSONSchemaBench set at each setting")
    run(ap.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
