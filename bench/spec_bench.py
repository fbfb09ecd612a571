#!/usr/bin/env python3
"""Speculative-decoding benchmark: grammar-aware drafts and jump-forward against plain decoding.

On the default model (SmolLM2-135M-Instruct), greedy (temperature 0), for five constraints:
`[0-9]{4}`, `[a-z]+@[a-z]+\\.com` (the Onyx paper's two), order IDs `[A-Z]{3}-[0-9]{4}`, and two
JSON schemas with fixed keys (a person record; a nested order with an items array), each with a
chat prompt that asks for that output. Rows, for each draft source:

    baseline                       gamma = 0, plain decoding
    blind        gamma 2 / 4 / 6   drafts ignore the grammar (the verifier still masks)
    aware        gamma 2 / 4 / 6   drafts filtered / masked by the grammar, no jump-forward
    aware+jf     gamma 2 / 4 / 6   aware + grammar-forced spans (jump-forward) drafted first
    aware+jf     gamma auto        aware + jump-forward + the adaptive gamma controller

Draft sources, in two blocks: "model-free" (prompt lookup, plus forced spans with jump-forward),
and "self-draft" (the target drafting for itself: `Engine(draft_model="smollm2")`). The only
draft model here that shares SmolLM2's tokenizer is SmolLM2-135M itself, so the self-draft block
is a degenerate upper bound on acceptance (greedy self-drafts are always accepted) and a lower
bound on speed (each draft step costs a full target step); on a Mac a user would pair e.g. a 0.5B
draft with a 7B target of the same family.

Per row: acceptance (overall and per source: model / lookup / forced), decode tok/s (median over
repetitions), target forwards per output token, the speedup over baseline (median of the paired
per-repetition ratios against the baseline run in the same block, same repetition), and
`same_as_baseline` (the greedy token ids equal plain decoding's in every repetition). All
configurations of a pattern run round-robin in an order rotated each repetition, so they see the
same machine load; short outputs are generated several times per measurement (tokens and decode
time summed) so that each measurement covers at least MIN_TOKENS tokens.

Targets (reported PASS/FAIL, not asserted):
  1. aware acceptance >= blind acceptance on every pattern (same gamma, same draft source);
  2. aware + jump-forward >= 1.8x baseline tok/s on both JSON schemas (model-free drafts);
  3. no mode slower than baseline by more than 5% on any pattern: checked on the adaptive row
     (the one that must hold); fixed-gamma rows that are slower are listed as information.
Also: for the order schema, how many output tokens lie in grammar-forced spans, and the
forward-count bound that forced spans alone give (tokens / (tokens - forced tokens)).

    python bench/spec_bench.py                      # full run (about 10-12 minutes on 2 cores)
    python bench/spec_bench.py --quick --no-draft-model --out /tmp/sb

Prints one table, writes spec_bench.json and spec_bench.png (speedup per pattern per row) to
--out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import math  # noqa: E402
import time  # noqa: E402

from bench.corpus import EMAIL, ORDER_ID, ORDER_SCHEMA_FREE, PERSON_SCHEMA_FREE, YEAR  # noqa: E402

MIN_TOKENS = 12  # each measurement covers at least this many generated tokens


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# (key, label, kind, constraint options, chat messages, max_tokens)
PATTERNS = [
    ("year", YEAR, "regex", {"regex": YEAR},
     _user("In what year did Apollo 11 land on the Moon? Reply with the year only."), 8),
    ("email", EMAIL, "regex", {"regex": EMAIL},
     _user("Maria Lopez works at Globex. Company email addresses are the first name followed by "
           "@globex.com. What is Maria's email address? Reply with the address only."), 32),
    ("order_id", ORDER_ID, "regex", {"regex": ORDER_ID},
     _user("The customer wrote: 'Hi, my order KLM-4821 has not arrived yet.' What is the order ID "
           "mentioned? Reply with the ID only."), 16),
    ("person", "JSON person (name, age, email)", "schema", {"json_schema": PERSON_SCHEMA_FREE},
     _user("Give a person record as JSON: Alice Johnson, 34 years old, email alice.johnson@example.com."), 64),
    ("order", "JSON order (id, customer, items[1..3])", "schema", {"json_schema": ORDER_SCHEMA_FREE},
     _user("Write an order as JSON: order ID ORD-1042 for customer Jane Doe (jane@shop.com), who bought "
           "2 notebooks (SKU NB-01) at 3.50 each and 1 pen (SKU PN-07) at 1.25."), 80),
]
QUICK_PATTERNS = ("email", "person")
JSON_PATTERNS = ("person", "order")
SOURCES = ("model", "lookup", "forced")

BLOCKS = {
    "model-free": "prompt lookup (+ grammar-forced spans with jump-forward)",
    "self-draft": "draft model = the target itself (SmolLM2-135M; the only same-tokenizer draft here): "
                  "a degenerate upper bound on acceptance, lower bound on draft cost savings",
}


def make_rows(gammas: list[int]) -> list[dict]:
    """The rows of one block: (name, speculative mode, jump_forward, num_draft_tokens)."""
    rows = [{"row": "baseline", "mode": "baseline", "jump_forward": False, "gamma": 0}]
    for family, mode, jf in (("blind", "blind", False), ("aware", "aware", False), ("aware+jf", "aware", True)):
        for g in gammas:
            rows.append({"row": f"{family} g={g}", "family": family, "mode": mode, "jump_forward": jf, "gamma": g})
    rows.append({"row": "aware+jf g=auto", "family": "aware+jf auto", "mode": "aware", "jump_forward": True,
                 "gamma": "auto"})
    rows[0]["family"] = "baseline"
    return rows


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------

def generate(engine, pattern, row):
    _key, _label, _kind, constraint, messages, max_tokens = pattern
    return engine.chat(messages, max_tokens=max_tokens, temperature=0, speculative=row["mode"],
                       num_draft_tokens=row["gamma"], jump_forward=row["jump_forward"], **constraint)


def measure(engine, pattern, row, inner: int) -> dict:
    """`inner` generations of one configuration: tok/s over their summed tokens and decode time,
    and the (deterministic, greedy) stats and token ids of the first."""
    tokens = 0
    decode_s = 0.0
    first = None
    same_inner = True
    draft_s = 0.0
    for _ in range(inner):
        r = generate(engine, pattern, row)
        tokens += r.stats["completion_tokens"]
        decode_s += r.stats["decode_s"]
        draft_s += r.stats.get("draft_s", 0.0)
        if first is None:
            first = r
        elif r.token_ids != first.token_ids:
            same_inner = False
    s = dict(first.stats)
    return {"token_ids": first.token_ids, "text": first.text, "valid": first.valid,
            "finish_reason": first.finish_reason, "stats": s, "same_inner": same_inner,
            "tok_s": tokens / decode_s if decode_s > 0 else 0.0, "decode_s": decode_s, "tokens": tokens,
            "draft_s_per_token": draft_s / tokens if tokens else 0.0}


def forced_span_tokens(engine, pattern, token_ids: list[int]) -> dict:
    """Walks an output through the grammar: how many of its tokens jump-forward would propose as
    forced (tokenized or learned as `onyx.decoding.drafts.ForcedTokens` does, matching the output), in how
    many spans; and the forward-count bound if those tokens cost nothing."""
    from onyx.decoding.drafts import ForcedTokens

    _key, _label, _kind, constraint, _messages, _max = pattern
    grammar = engine.compile(**constraint)
    forced = ForcedTokens(grammar, engine.loaded.tokenizer, engine.vocab)
    eos = set(engine.loaded.eos_token_ids)
    ids = [t for t in token_ids if t not in eos]
    state, i, n_forced, spans, cut = grammar.initial_state, 0, 0, 0, 0
    while i < len(ids):
        span = forced.at(state)
        m = 0
        while m < len(span) and i + m < len(ids) and span[m] == ids[i + m]:
            m += 1
        if span and m < len(span):
            cut += 1  # the output leaves the forced tokenization
        if m:
            spans += 1
            n_forced += m
            for t in ids[i:i + m]:
                forced.observe(state, t)
                state = grammar.advance(state, t)
            i += m
            continue
        forced.observe(state, ids[i])
        state = grammar.advance(state, ids[i])
        i += 1
    n = len(ids)
    return {"tokens": n, "forced_tokens": n_forced, "forced_spans": spans, "forced_fraction": round(n_forced / n, 4)
            if n else 0.0, "spans_left_early": cut,
            "forward_bound_speedup": round(n / (n - n_forced), 3) if n > n_forced else float("inf")}


def run(args) -> dict:
    from onyx import Engine

    gammas = [4] if args.quick else [2, 4, 6]
    patterns = [p for p in PATTERNS if p[0] in QUICK_PATTERNS] if args.quick else list(PATTERNS)
    if args.patterns:
        wanted = args.patterns.split(",")
        patterns = [p for p in PATTERNS if p[0] in wanted]
    reps = args.reps or (2 if args.quick else 3)
    rows = make_rows(gammas)

    t_load = time.perf_counter()
    engines = {"model-free": Engine()}
    if not args.no_draft_model:
        engines["self-draft"] = Engine(draft_model="smollm2")
    load_s = time.perf_counter() - t_load
    jobs = [(block, row) for row in rows for block in engines]  # blocks interleaved row by row

    def log(msg):
        if args.verbose:
            print(msg, file=sys.stderr, flush=True)

    # Warm-up per pattern (grammar compile, mask cache, MLX kernels at each width), not recorded;
    # the model-free baseline's output is the reference, and sets the inner repetition count.
    reference, inner = {}, {}
    for p in patterns:
        for block, eng in engines.items():
            for row in rows:
                if row["row"] in ("baseline", f"aware+jf g={gammas[-1]}"):
                    r = generate(eng, p, row)
                    if block == "model-free" and row["mode"] == "baseline":
                        reference[p[0]] = r
        n = max(1, len(reference[p[0]].token_ids))
        inner[p[0]] = max(1, math.ceil(MIN_TOKENS / n))
        log(f"warm-up {p[0]}: {n} tokens, {inner[p[0]]} generation(s) per measurement")

    samples: dict[tuple, list[dict]] = {(b, p[0], r["row"]): [] for p in patterns for b in engines for r in rows}
    rep_load = []
    t_runs = time.perf_counter()
    for rep in range(reps):
        rep_load.append(harness.loadavg())
        for pi, p in enumerate(patterns):
            k = (rep * 5 + pi) % len(jobs)
            order = jobs[k:] + jobs[:k]
            if rep % 2:
                order = order[::-1]
            for block, row in order:
                m = measure(engines[block], p, row, inner[p[0]])
                samples[(block, p[0], row["row"])].append(m)
        log(f"rep {rep + 1}/{reps} done at {time.perf_counter() - t_runs:.0f} s, load {harness.loadavg()}")
    runs_s = time.perf_counter() - t_runs

    out_rows = []
    for p in patterns:
        ref_ids = reference[p[0]].token_ids
        for block in engines:
            base = samples[(block, p[0], "baseline")]
            for row in rows:
                ms = samples[(block, p[0], row["row"])]
                s = ms[0]["stats"]
                ratios = harness.paired_ratios([m["tok_s"] for m in ms], [b["tok_s"] for b in base])
                n_tok = s["completion_tokens"]
                rec = {
                    "block": block, "pattern": p[0], "row": row["row"], "family": row["family"],
                    "mode": row["mode"], "jump_forward": row["jump_forward"], "gamma": row["gamma"],
                    "completion_tokens": n_tok, "target_forwards": s["target_forwards"],
                    "forwards_per_token": round(s["target_forwards"] / n_tok, 4) if n_tok else None,
                    "drafted": s.get("drafted", 0), "accepted": s.get("accepted", 0),
                    "acceptance_rate": s.get("acceptance_rate", 0.0),
                    "drafts_per_round": round(s.get("drafted", 0) / s["target_forwards"], 3)
                    if s["target_forwards"] else 0.0,
                    "tok_s": round(harness.median([m["tok_s"] for m in ms]), 3),
                    "tok_s_all": [round(m["tok_s"], 3) for m in ms],
                    "speedup": round(harness.median(ratios), 4),
                    "speedup_all": [round(x, 4) for x in ratios],
                    "speedup_of_medians": round(harness.median([m["tok_s"] for m in ms])
                                                / harness.median([b["tok_s"] for b in base]), 4),
                    "draft_ms_per_token": round(1000 * harness.median([m["draft_s_per_token"] for m in ms]), 3),
                    "same_as_baseline": all(m["token_ids"] == ref_ids and m["same_inner"] for m in ms),
                    "valid": ms[0]["valid"], "finish_reason": ms[0]["finish_reason"],
                    "generations_per_measurement": inner[p[0]],
                }
                for src in SOURCES:
                    if f"drafted_{src}" in s:
                        rec[f"drafted_{src}"] = s[f"drafted_{src}"]
                        rec[f"accepted_{src}"] = s[f"accepted_{src}"]
                        rec[f"acceptance_rate_{src}"] = s[f"acceptance_rate_{src}"]
                if not rec["same_as_baseline"]:
                    rec["text"] = ms[0]["text"]
                out_rows.append(rec)

    forced = {}
    for p in patterns:
        if p[2] == "schema":
            forced[p[0]] = forced_span_tokens(engines["model-free"], p, reference[p[0]].token_ids)

    return {
        "meta": {
            "model": engines["model-free"].model_name,
            "draft_model": "smollm2 (self-draft)" if "self-draft" in engines else None,
            "blocks": {b: BLOCKS[b] for b in engines},
            "temperature": 0, "gammas": gammas, "reps": reps, "quick": bool(args.quick),
            "min_tokens_per_measurement": MIN_TOKENS,
            "speedup": "median over repetitions of tok/s(row) / tok/s(baseline of the same block, same repetition)",
            "load_s": round(load_s, 2), "runs_s": round(runs_s, 1), "loadavg_per_rep": rep_load,
            **harness.machine_meta(),
        },
        "patterns": [{"key": p[0], "label": p[1], "kind": p[2], "max_tokens": p[5],
                      "messages": p[4], "constraint": p[3],
                      "baseline_text": reference[p[0]].text, "baseline_tokens": len(reference[p[0]].token_ids),
                      "generations_per_measurement": inner[p[0]]} for p in patterns],
        "rows": out_rows,
        "forced_spans": forced,
    }


# --------------------------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------------------------

def evaluate_targets(res: dict) -> dict:
    rows = res["rows"]
    patterns = [p["key"] for p in res["patterns"]]
    blocks = list(res["meta"]["blocks"])
    gammas = res["meta"]["gammas"]

    def get(block, pattern, row):
        return next((r for r in rows if r["block"] == block and r["pattern"] == pattern and r["row"] == row), None)

    t = {"aware_acceptance_ge_blind": {}, "aware_jf_1_8x_on_json": {}, "no_mode_slower_than_baseline": {},
         "slower_fixed_gamma_rows": [], "greedy_rows_equal_baseline": {}}
    for p in patterns:
        per = {}
        for b in blocks:
            for g in gammas:
                a, bl = get(b, p, f"aware g={g}"), get(b, p, f"blind g={g}")
                per[f"{b} g={g}"] = {"aware": a["acceptance_rate"], "blind": bl["acceptance_rate"],
                                     "aware_drafted": a["drafted"], "blind_drafted": bl["drafted"],
                                     "pass": a["acceptance_rate"] >= bl["acceptance_rate"]}
        t["aware_acceptance_ge_blind"][p] = {"pass": all(v["pass"] for v in per.values()), "detail": per}

        slow = {}
        for b in blocks:
            r = get(b, p, "aware+jf g=auto")
            slow[b] = {"speedup": r["speedup"], "pass": r["speedup"] >= 0.95}
            for x in rows:
                if x["block"] == b and x["pattern"] == p and x["row"] not in ("baseline", "aware+jf g=auto") \
                        and x["speedup"] < 0.95:
                    t["slower_fixed_gamma_rows"].append({"block": b, "pattern": p, "row": x["row"],
                                                         "speedup": x["speedup"]})
        t["no_mode_slower_than_baseline"][p] = {"pass": all(v["pass"] for v in slow.values()),
                                                "adaptive_row": slow}
        t["greedy_rows_equal_baseline"][p] = {
            "pass": all(x["same_as_baseline"] for x in rows if x["pattern"] == p),
            "differing_rows": [f"{x['block']} {x['row']}" for x in rows if x["pattern"] == p and not x["same_as_baseline"]]}

    for p in patterns:
        if p not in JSON_PATTERNS:
            continue
        vals = {f"g={g}": get("model-free", p, f"aware+jf g={g}")["speedup"] for g in gammas}
        vals["g=auto"] = get("model-free", p, "aware+jf g=auto")["speedup"]
        best = max(vals, key=vals.get)
        t["aware_jf_1_8x_on_json"][p] = {"pass": vals[best] >= 1.8, "best": best, "speedups": vals,
                                         "pass_adaptive": vals["g=auto"] >= 1.8}
    return t


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------

def _fmt(x, spec=".2f", none="-"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    return format(x, spec)


def print_table(res: dict) -> None:
    hdr = (f"{'block':<11} {'pattern':<9} {'row':<16} {'acc':>5} {'acc_mdl':>7} {'acc_lkp':>7} {'acc_frc':>7} "
           f"{'fwd/tok':>7} {'drafts/rnd':>10} {'tok/s':>7} {'speedup':>7} {'same':>5}")
    print(hdr)
    print("-" * len(hdr))
    last = None
    for r in res["rows"]:
        if last is not None and (r["pattern"], r["block"]) != last:
            print()
        last = (r["pattern"], r["block"])

        def src(s):
            if f"acceptance_rate_{s}" not in r:
                return "-"
            return f"{r[f'acceptance_rate_{s}']:.2f}"
        acc = f"{r['acceptance_rate']:.2f}" if r["drafted"] else "-"
        print(f"{r['block']:<11} {r['pattern']:<9} {r['row']:<16} {acc:>5} {src('model'):>7} {src('lookup'):>7} "
              f"{src('forced'):>7} {_fmt(r['forwards_per_token']):>7} {r['drafts_per_round']:>10.2f} "
              f"{r['tok_s']:>7.1f} {r['speedup']:>6.2f}x {'yes' if r['same_as_baseline'] else 'NO':>5}")


def print_targets(res: dict) -> None:
    t = res["targets"]
    print("\nTargets (reported, not asserted)")
    print("  1. aware acceptance >= blind (same gamma, same draft source), per pattern:")
    for p, v in t["aware_acceptance_ge_blind"].items():
        worst = min(v["detail"].items(), key=lambda kv: kv[1]["aware"] - kv[1]["blind"])
        print(f"     {p:<9} {'PASS' if v['pass'] else 'FAIL'}  (e.g. {worst[0]}: aware {worst[1]['aware']:.2f} "
              f"[{worst[1]['aware_drafted']} drafted] vs blind {worst[1]['blind']:.2f} "
              f"[{worst[1]['blind_drafted']} drafted])")
    print("  2. aware + jump-forward >= 1.8x baseline tok/s on the JSON schemas (model-free drafts):")
    for p, v in t["aware_jf_1_8x_on_json"].items():
        sp = ", ".join(f"{k} {x:.2f}x" for k, x in v["speedups"].items())
        print(f"     {p:<9} {'PASS' if v['pass'] else 'FAIL'}  (best {v['best']}; {sp}; adaptive row "
              f"{'PASS' if v['pass_adaptive'] else 'FAIL'})")
    print("  3. no mode slower than baseline by > 5% (the adaptive row, each draft source):")
    for p, v in t["no_mode_slower_than_baseline"].items():
        sp = ", ".join(f"{b} {x['speedup']:.2f}x" for b, x in v["adaptive_row"].items())
        print(f"     {p:<9} {'PASS' if v['pass'] else 'FAIL'}  ({sp})")
    if t["slower_fixed_gamma_rows"]:
        print("     fixed-gamma rows slower than 0.95x (information; all in the JSON):")
        for b in res["meta"]["blocks"]:
            for p in t["no_mode_slower_than_baseline"]:
                xs = [x for x in t["slower_fixed_gamma_rows"] if x["block"] == b and x["pattern"] == p]
                if xs:
                    print(f"       {b:<10} {p:<9} " + ", ".join(f"{x['row']} {x['speedup']:.2f}x" for x in xs))
    print("  greedy rows give baseline's token ids:")
    for p, v in t["greedy_rows_equal_baseline"].items():
        print(f"     {p:<9} {'PASS' if v['pass'] else 'FAIL'}" + (f"  (differ: {', '.join(v['differing_rows'])})"
                                                                  if v["differing_rows"] else ""))
    for p, f in res["forced_spans"].items():
        jf = [r for r in res["rows"] if r["block"] == "model-free" and r["pattern"] == p and r["family"].startswith("aware+jf")]
        got = "; ".join(f"{r['row']}: forced {r.get('accepted_forced', 0)}/{r.get('drafted_forced', 0)} accepted, "
                        f"{r['forwards_per_token']:.2f} fwd/tok" for r in jf)
        print(f"  forced spans, {p}: {f['forced_tokens']} of {f['tokens']} output tokens ({100 * f['forced_fraction']:.0f}%) "
              f"in {f['forced_spans']} forced spans -> forward-count bound {f['forward_bound_speedup']:.2f}x from "
              f"forced spans alone; measured {got}")


def plot(res: dict, path: Path) -> bool:
    plt = harness.pyplot()
    if plt is None:
        return False
    blocks = list(res["meta"]["blocks"])
    patterns = [p["key"] for p in res["patterns"]]
    names = [r["row"] for r in res["rows"] if r["block"] == blocks[0] and r["pattern"] == patterns[0]]
    fig, axes = plt.subplots(len(blocks), 1, figsize=(max(8, 2.2 * len(patterns)), 4.2 * len(blocks)), squeeze=False)
    cmap = plt.get_cmap("tab20")
    width = 0.85 / len(names)
    for ax, b in zip(axes[:, 0], blocks):
        for j, name in enumerate(names):
            ys = []
            for p in patterns:
                r = next(x for x in res["rows"] if x["block"] == b and x["pattern"] == p and x["row"] == name)
                ys.append(r["speedup"])
            xs = [i + (j - (len(names) - 1) / 2) * width for i in range(len(patterns))]
            ax.bar(xs, ys, width, label=name, color=cmap(j % 20))
        ax.axhline(1.0, color="black", lw=0.8)
        ax.axhline(0.95, color="red", lw=0.6, ls="--")
        ax.axhline(1.8, color="green", lw=0.6, ls=":")
        ax.set_xticks(range(len(patterns)))
        ax.set_xticklabels(patterns)
        ax.set_ylabel("speedup over baseline (tok/s)")
        ax.set_title(f"{b}: {res['meta']['blocks'][b][:90]}", fontsize=9)
    axes[0, 0].legend(fontsize=7, ncol=min(6, len(names)), loc="upper left")
    load = res["meta"]["loadavg_per_rep"]
    fig.suptitle(f"Onyx speculative decoding, greedy, {res['meta']['model']} "
                 f"(load avg per rep: {', '.join(str(l[0]) if l else '?' for l in load)}; {res['meta']['cpus']} CPUs)",
                 fontsize=10)
    harness.save_figure(fig, path)
    return True


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "two patterns, gamma 4 only, 2 repetitions")
    ap.add_argument("--no-draft-model", action="store_true", help="model-free drafts only (no self-draft block)")
    ap.add_argument("--reps", type=int, default=0, help="repetitions (default 3, or 2 with --quick)")
    ap.add_argument("--patterns", default="", help="comma-separated pattern keys (default: all, or the quick set)")
    ap.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = ap.parse_args(argv)
    out = harness.out_dir(args.out)

    t0 = time.perf_counter()
    load_before = harness.loadavg()
    res = run(args)
    res["meta"]["loadavg_start"] = load_before
    res["meta"]["loadavg_end"] = harness.loadavg()
    res["meta"]["wall_s"] = round(time.perf_counter() - t0, 1)
    res["targets"] = evaluate_targets(res)

    print_table(res)
    print_targets(res)
    harness.save_results(out, "spec_bench", res, plot)
    m = res["meta"]
    print(f"{m['reps']} repetitions, wall {m['wall_s']} s (model load {m['load_s']} s), load average "
          f"{load_before} -> {m['loadavg_end']} on {m['cpus']} CPUs")
    if "self-draft" in m["blocks"]:
        print("note: the self-draft block drafts with the target itself (SmolLM2-135M; no smaller model shares its "
              "tokenizer here): a degenerate upper bound on acceptance. On a Mac, use e.g. a 0.5B draft for a 7B "
              "target of the same family.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
