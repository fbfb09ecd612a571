#!/usr/bin/env python3
"""Grammar-layer benchmark: Onyx against llguidance, outlines-core and xgrammar.

For every (vocabulary, pattern, engine) it measures
  * first mask   – compile + the first next-token mask, a fresh grammar each repetition (median);
  * eager build  – Onyx: compile + `build_all()`; outlines-core: its Index construction (eager by
                   nature); xgrammar: its compile (the work it does upfront); llguidance: n/a (lazy);
  * step         – producing the next-token mask and advancing by one token, along a valid walk
                   (a fixed sample string tokenized greedily, longest match, into the vocabulary);
                   "cold" is the first walk on a fresh grammar, mean/p99 are the warm steady state;
  * memory       – Onyx `memory_bytes` after a full build; peers where their API tells a size.

Pushdown section (the context-free patterns of `corpus.PUSHDOWN_PATTERNS`: recursive JSON Schemas
and llama.cpp's json.gbnf and c.gbnf, on --pushdown-vocab): the sample's walk and seeded random
walks made from Onyx's masks, replayed by Onyx, llguidance and xgrammar. Per state the mask and
the advance are timed apart: median, p99 and max, cold (one pass on a freshly compiled grammar)
and warm (the passes after it); and the states where each peer's mask differs from Onyx's.

Every peer gets a vocabulary made of the same token bytes Onyx reads from the GGUF file (special
tokens are empty, the same EOS ids). Each (vocabulary, engine) runs in its own worker process:
a call that hangs past `--task-timeout` is killed, recorded as an error, and the bench goes on.

    python bench/grammar_bench.py                 # all vocabularies, all engines (a few minutes)
    python bench/grammar_bench.py --quick --engines onyx --out /tmp/gb
    python bench/grammar_bench.py --vocab qwen2 --engines onyx,xgrammar
    python bench/grammar_bench.py --vocab qwen2 --section pushdown --walks 8 --walk-len 300

Results: a table on stdout, `grammar_bench.json` and `grammar_bench.png` in `--out`
(default bench/results). Targets (reported, not asserted): Onyx step <= 2 us at 152k tokens in
every state, first mask <= 5 ms, eager build >= 5x faster than outlines-core's index; pushdown
walks at 152k tokens: mask median <= 2 us, p99 <= 50 us.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import statistics  # noqa: E402

import numpy as np  # noqa: E402

from bench import peers  # noqa: E402
from bench.corpus import GRAMMAR_PATTERNS as PATTERNS, PUSHDOWN_PATTERNS, VOCABS  # noqa: E402
from bench.peers import ENGINES  # noqa: E402
from bench.grammar_pushdown import (PD_ENGINES, _ids, evaluate_pushdown, fmt, pattern_label,  # noqa: E402
                                    print_pushdown, run_pushdown_rows)

TARGET_STEP_US = 2.0
TARGET_FIRST_MASK_MS = 5.0
TARGET_EAGER_SPEEDUP = 5.0


def med_ms(xs):
    return statistics.median(xs) * 1e3 if xs else None


# --------------------------------------------------------------------------------------------
# One row, inside a worker
# --------------------------------------------------------------------------------------------


def step_stats(walks: list[list[int]]) -> dict:
    """walks: per-walk lists of per-step ns. Mean and p99 over all steps of all walks, and the
    worst state (largest per-step median across walks)."""
    allv = np.array([x for w in walks for x in w], dtype=np.float64) / 1e3
    per_step = np.median(np.array(walks, dtype=np.float64), axis=0) / 1e3
    return {
        "mean_us": float(allv.mean()),
        "p99_us": float(np.percentile(allv, 99)),
        "median_us": float(np.median(allv)),
        "worst_state_us": float(per_step.max()),
        "per_step_median_us": [round(float(x), 3) for x in per_step],
        "samples": int(allv.size),
    }


def onyx_breakdown(g, tokens: list[int], walks: int) -> dict:
    """Warm mask-only, advance-only, mask + copy into a caller buffer, and a bare Python
    method call, to see what the per-step time is made of."""
    pc = time.perf_counter_ns
    states = [g.initial_state]
    for tok in tokens:
        states.append(g.advance(states[-1], tok))
    mask, adv, acc = g.token_bitmask, g.advance, g.is_accepting
    buf = np.empty(len(mask(states[0])), dtype=np.uint32)
    m_ns, a_ns, c_ns, n_ns = [], [], [], []
    for _ in range(walks):
        for i, s in enumerate(states):
            t0 = pc(); mask(s); t1 = pc()
            m_ns.append(t1 - t0)
            t0 = pc(); np.copyto(buf, mask(s)); t1 = pc()
            c_ns.append(t1 - t0)
            t0 = pc(); acc(s); t1 = pc()
            n_ns.append(t1 - t0)
            if i < len(tokens):
                t0 = pc(); adv(s, tokens[i]); t1 = pc()
                a_ns.append(t1 - t0)
    f = lambda xs: float(np.mean(xs) / 1e3)  # noqa: E731
    return {"mask_only_mean_us": f(m_ns), "advance_only_mean_us": f(a_ns),
            "mask_copy_mean_us": f(c_ns), "is_accepting_call_mean_us": f(n_ns)}


def onyx_all_states(g, repeats: int = 5) -> dict:
    """After build_all: token_bitmask of every state (median of `repeats` calls each)."""
    pc = time.perf_counter_ns
    mask = g.token_bitmask
    per, skipped = [], 0
    for s in range(g.num_states):
        try:
            mask(s)
        except Exception:  # noqa: BLE001 - a state without a mask (e.g. dead)
            skipped += 1
            continue
        xs = []
        for _ in range(repeats):
            t0 = pc(); mask(s); t1 = pc()
            xs.append(t1 - t0)
        per.append(statistics.median(xs))
    if not per:
        return {"states": 0, "skipped": skipped}
    arr = np.array(per) / 1e3
    return {"states": len(per), "skipped": skipped, "mean_us": float(arr.mean()),
            "max_us": float(arr.max())}


def run_row(eng: peers.Adapter, task: dict) -> dict:
    """Every measurement of one (vocabulary, pattern, engine); runs in the engine's worker."""
    kind, spec, tokens, reps = task["kind"], task["spec"], task["tokens"], task["reps"]
    row: dict = {"errors": []}

    # first mask (compile + first mask, fresh grammar each time)
    fm = harness.repeat(lambda: peers.first_mask(eng, kind, spec), reps["first"], reps["budget_s"])
    row["first_mask_ms"] = med_ms([r["first_mask"] for r in fm])
    row["compile_ms"] = med_ms([r["compile"] for r in fm])
    row["first_mask_reps"] = len(fm)
    compiled = fm[-1]["obj"]

    # eager build
    if eng.eager_by_nature:
        row["eager_build_ms"] = row["compile_ms"]
    elif eng.build is not None:
        _, ts = harness.timed(lambda: eng.build(kind, spec), reps["eager"], reps["budget_s"])
        row["eager_build_ms"] = med_ms(ts)
    else:
        row["eager_build_ms"] = None
    row["eager_note"] = eng.eager_note

    # check walk: every token allowed, masks' signatures, acceptance
    try:
        fresh = compiled if eng.eager_by_nature else eng.compile(kind, spec)
        sigs, accepted = peers.check_walk(eng, fresh, tokens)
        row["mask_signatures"] = [list(s[:3]) for s in sigs]
        row["_masks"] = [s[3] for s in sigs]  # compared with Onyx's by the parent, not saved
        row["accepted"] = accepted
        if not accepted:
            row["errors"].append("walk did not end in an accepting state")
    except Exception as e:  # noqa: BLE001 - recorded in the row
        row["errors"].append(f"check walk: {type(e).__name__}: {e}")

    # cold walk: first walk on a freshly compiled grammar
    cold_obj = compiled if eng.eager_by_nature else eng.compile(kind, spec)
    cold = eng.timed_walk(cold_obj, tokens)
    row["cold_step_mean_us"] = float(np.mean(cold) / 1e3)
    row["cold_step_max_us"] = float(np.max(cold) / 1e3)

    # warm walks: one warm-up walk, then timed walks (enough for min_samples steps)
    eng.timed_walk(cold_obj, tokens)
    n_walks = max(reps["walks"], -(-reps["min_samples"] // (len(tokens) + 1)))
    walks = harness.repeat(lambda: eng.timed_walk(cold_obj, tokens), n_walks, reps["budget_s"])
    st = step_stats(walks)
    row["step_mean_us"], row["step_p99_us"] = st["mean_us"], st["p99_us"]
    row["step_median_us"], row["step_worst_state_us"] = st["median_us"], st["worst_state_us"]
    row["step_per_step_median_us"] = st["per_step_median_us"]
    row["step_walks"] = len(walks)
    row["n_steps"] = len(tokens) + 1

    if eng.name == "onyx":
        row["onyx_breakdown"] = onyx_breakdown(cold_obj, tokens, max(3, reps["walks"] // 2))
    mem, note = eng.memory(cold_obj)
    row["memory_bytes"], row["memory_note"] = mem, note
    if eng.name == "onyx":
        row["num_states"] = int(cold_obj.num_states)
        row["all_states"] = onyx_all_states(cold_obj)
    return row


# --------------------------------------------------------------------------------------------
# Comparing and reporting
# --------------------------------------------------------------------------------------------

def compare_masks(rows: list[dict], token_bytes: dict[str, list[bytes]]):
    """Marks each peer row with the steps where its mask (EOS bits aside) differs from Onyx's
    along the same walk: whether it allows a subset or a superset, and a few token examples."""
    by_key = {(r["vocab"], r["pattern"]): r for r in rows if r["engine"] == "onyx"}
    for r in rows:
        o = by_key.get((r["vocab"], r["pattern"]))
        if r["engine"] == "onyx" or not o or "_masks" not in r or "_masks" not in o:
            continue
        toks = token_bytes[r["vocab"]]
        diffs = []
        for i, (a, b) in enumerate(zip(r["_masks"], o["_masks"])):
            if a == b:
                continue
            pa, po = np.frombuffer(a, dtype=np.uint32), np.frombuffer(b, dtype=np.uint32)
            extra, missing = _ids(pa & ~po), _ids(po & ~pa)
            diffs.append({"step": i, "peer_allowed": r["mask_signatures"][i][0],
                          "onyx_allowed": o["mask_signatures"][i][0],
                          "only_peer": [[t, toks[t].decode("utf-8", "replace")] for t in extra],
                          "only_onyx": [[t, toks[t].decode("utf-8", "replace")] for t in missing]})
        kinds = {("subset" if not d["only_peer"] else "superset" if not d["only_onyx"] else "different")
                 for d in diffs}
        r["mask_diff_vs_onyx"] = {"steps_differing": len(diffs), "steps": len(o["_masks"]),
                                  "relation": "/".join(sorted(kinds)) or "equal", "examples": diffs[:5]}
    for r in rows:
        r.pop("_masks", None)


def add_ratios(rows):
    by_key = {(r["vocab"], r["pattern"]): r for r in rows if r["engine"] == "onyx"}
    for r in rows:
        o = by_key.get((r["vocab"], r["pattern"]))
        rat = {}
        for key, col in (("first_mask", "first_mask_ms"), ("eager_build", "eager_build_ms"),
                         ("step", "step_mean_us")):
            a, b = r.get(col), (o or {}).get(col)
            rat[key] = (a / b) if (a and b) else None
        r["ratio_vs_onyx"] = rat


def evaluate_targets(rows) -> list[dict]:
    out = []
    outl = {(r["vocab"], r["pattern"]): r for r in rows if r["engine"] == "outlines-core"}
    for r in rows:
        if r["engine"] != "onyx":
            continue
        t = {"vocab": r["vocab"], "vocab_size": r["vocab_size"], "pattern": r["pattern"]}
        if r.get("error"):
            t["error"] = r["error"]
            out.append(t)
            continue
        worst = max(x for x in [r.get("step_worst_state_us"), (r.get("all_states") or {}).get("max_us")]
                    if x is not None)
        t["step"] = {"worst_us": worst, "pass": worst <= TARGET_STEP_US,
                     "applies": r["vocab_size"] >= 150_000}
        t["first_mask"] = {"ms": r["first_mask_ms"], "pass": r["first_mask_ms"] <= TARGET_FIRST_MASK_MS}
        p = outl.get((r["vocab"], r["pattern"]))
        if p and p.get("eager_build_ms") and r.get("eager_build_ms"):
            sp = p["eager_build_ms"] / r["eager_build_ms"]
            t["eager_vs_outlines"] = {"speedup": sp, "pass": sp >= TARGET_EAGER_SPEEDUP}
        else:
            t["eager_vs_outlines"] = {"speedup": None, "pass": None,
                                      "why": (p or {}).get("error") or "no outlines-core row"}
        out.append(t)
    return out


def fmt_mem(b):
    if b is None:
        return "n/a"
    if b < 1 << 20:
        return f"{b / 1024:.1f} KiB"
    return f"{b / (1 << 20):.1f} MiB"


def print_table(rows, targets):
    cols = ["vocab", "pattern", "engine", "first ms", "eager ms", "cold µs", "step µs", "p99 µs",
            "memory", "first×", "eager×", "step×", "note"]
    lines = []
    for r in rows:
        rat = r.get("ratio_vs_onyx") or {}
        note = r.get("error") or ""
        if not note:
            parts = []
            if r["engine"] != "onyx" and r.get("eager_note") and r["engine"] != "outlines-core":
                parts.append(r["eager_note"])
            if r.get("errors"):
                parts.extend(r["errors"])
            d = r.get("mask_diff_vs_onyx")
            if d and d["steps_differing"]:
                parts.append(f"mask is a {d['relation']} of Onyx's at {d['steps_differing']}/{d['steps']} steps")
            if r["engine"] == "onyx" and r.get("tokenization", "").startswith("plain"):
                parts.append("tokens not checked by Onyx")
            note = "; ".join(parts)
        lines.append([
            r["vocab"], r["pattern"], r["engine"], fmt(r.get("first_mask_ms")),
            fmt(r.get("eager_build_ms")), fmt(r.get("cold_step_mean_us")), fmt(r.get("step_mean_us")),
            fmt(r.get("step_p99_us")), fmt_mem(r.get("memory_bytes")),
            "" if r["engine"] == "onyx" else fmt(rat.get("first_mask"), "×", 1),
            "" if r["engine"] == "onyx" else fmt(rat.get("eager_build"), "×", 1),
            "" if r["engine"] == "onyx" else fmt(rat.get("step"), "×", 1),
            note[:90],
        ])
    widths = [max(len(c), *(len(l[i]) for l in lines)) if lines else len(c) for i, c in enumerate(cols)]
    right = set(range(3, 12))

    def line(vals):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    print(line(cols))
    print("  ".join("-" * w for w in widths))
    prev = None
    for l in lines:
        if prev and (l[0], l[1]) != prev:
            print()
        prev = (l[0], l[1])
        print(line(l))
    print("\nratios are peer / Onyx (above 1: Onyx is faster). step = next-token mask + advance, "
          "warm; cold = first walk on a fresh grammar.")

    print(f"\nTargets (Onyx): step <= {TARGET_STEP_US} µs in every state at 152k tokens (worst of "
          f"per-step medians along the walk and of every state's mask after build_all); first mask "
          f"<= {TARGET_FIRST_MASK_MS} ms; eager build >= {TARGET_EAGER_SPEEDUP}× faster than outlines-core")
    pf = lambda ok: "n/a " if ok is None else ("PASS" if ok else "FAIL")  # noqa: E731
    for t in targets:
        label = f"  {t['vocab']:8} {t['pattern']:8}"
        if "error" in t:
            print(f"{label} ERROR {t['error'][:100]}")
            continue
        s, f, e = t["step"], t["first_mask"], t["eager_vs_outlines"]
        step_txt = f"step {pf(s['pass'])} ({fmt(s['worst_us'])} µs)" + ("" if s["applies"] else " [info: target is at 152k]")
        eag = f"eager×outlines {pf(e['pass'])} ({fmt(e['speedup'], '×', 1)})" if e["speedup"] else f"eager×outlines n/a ({str(e.get('why'))[:40]})"
        print(f"{label} {step_txt:44} first mask {pf(f['pass'])} ({fmt(f['ms'])} ms)   {eag}")
    at152 = [t for t in targets if t.get("vocab_size", 0) >= 150_000]
    if at152:
        done = [t for t in at152 if "error" not in t]
        failed = [t for t in done if not (t["step"]["pass"] and t["first_mask"]["pass"])
                  or t["eager_vs_outlines"]["pass"] is False]
        missing = [t for t in at152 if "error" in t or t["eager_vs_outlines"]["pass"] is None]
        verdict = "FAIL" if failed else ("INCOMPLETE" if missing else "PASS")
        print(f"  targets at >=152k tokens: {verdict}: {len(done) - len(failed)}/{len(at152)} patterns pass"
              + (f", {len(failed)} fail" if failed else "")
              + (f", {len(missing)} without a result (Onyx or outlines-core row missing)" if missing else ""))


def plot(rows, path: Path):
    plt = harness.pyplot()
    if plt is None:
        return None
    vocabs = [v for v in VOCABS if any(r["vocab"] == v for r in rows)]
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    pats = [p[0] for p in PATTERNS if any(r["pattern"] == p[0] for r in rows)]
    colors = {"onyx": "#1b9e77", "outlines-core": "#d95f02", "xgrammar": "#7570b3", "llguidance": "#e7298a"}
    fig, axes = plt.subplots(len(vocabs), 2, figsize=(14, 4.2 * len(vocabs)), squeeze=False)
    bw = 0.8 / max(1, len(engines))
    for vi, v in enumerate(vocabs):
        size = next(r["vocab_size"] for r in rows if r["vocab"] == v)
        for ci, (col, title) in enumerate((("step_mean_us", "step mean (µs): mask + advance, warm"),
                                           ("eager_build_ms", "eager build (ms)"))):
            ax = axes[vi][ci]
            for ei, e in enumerate(engines):
                xs, ys = [], []
                for pi, p in enumerate(pats):
                    r = next((r for r in rows if r["vocab"] == v and r["engine"] == e and r["pattern"] == p), None)
                    val = r.get(col) if r else None
                    x = pi + (ei - (len(engines) - 1) / 2) * bw
                    if val:
                        xs.append(x)
                        ys.append(val)
                    else:
                        ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7,
                                transform=ax.get_xaxis_transform())
                ax.bar(xs, ys, width=bw, label=e, color=colors.get(e))
            ax.set_yscale("log")
            ax.set_xticks(range(len(pats)))
            ax.set_xticklabels(pats)
            ax.set_title(f"{v} ({size:,} tokens): {title}")
            ax.grid(axis="y", which="both", alpha=0.3)
            if col == "step_mean_us":
                ax.axhline(TARGET_STEP_US, color="k", ls="--", lw=0.8)
            if vi == 0 and ci == 0:
                ax.legend(fontsize=8)
    return harness.save_figure(fig, path)


def run_rows(vocabs, engines, pats, reps: dict, task_timeout: float, budget: float, t_start: float):
    """Every (vocabulary, engine, pattern) row, each engine in its own worker process per
    vocabulary; (rows, each worker's setup info, each vocabulary's token bytes)."""
    rows: list[dict] = []
    setup: dict = {}
    token_bytes: dict[str, list[bytes]] = {}
    for vname in vocabs:
        vd = peers.VocabData(vname)
        token_bytes[vname] = vd.tokens
        samples = {}
        for name, kind, spec, sample in pats:
            try:
                toks, how = vd.tokenize_sample(kind, spec, sample)
                samples[name] = (toks, how, None)
            except Exception as e:  # noqa: BLE001
                samples[name] = (None, None, f"tokenizing the sample: {type(e).__name__}: {e}")
        for engine in engines:
            base = {"vocab": vname, "vocab_size": vd.size, "engine": engine}
            why = peers.peer_available(engine)
            worker = None
            for name, kind, spec, sample in pats:
                row = dict(base, pattern=name, kind=kind, pattern_text=pattern_label(kind, spec),
                           sample=sample)
                toks, how, terr = samples[name]
                row["tokens"], row["tokenization"] = toks, how
                elapsed = time.perf_counter() - t_start
                if why or terr:
                    row["error"] = why or terr
                elif elapsed > budget:
                    row["error"] = f"skipped: bench time budget ({budget:.0f} s) used up"
                else:
                    if worker is None or not worker.alive():
                        worker = harness.Worker(peers.open_adapter, (engine, vname), task_timeout)
                        if worker.info:
                            setup[f"{vname}/{engine}"] = worker.info
                    if worker.error:
                        row["error"] = worker.error
                        worker = None
                    else:
                        remaining = max(30.0, budget - elapsed + 60.0)
                        res, err = worker.run(run_row, {"kind": kind, "spec": spec, "tokens": toks, "reps": reps},
                                              min(task_timeout, remaining))
                        if err:
                            row["error"] = err
                        else:
                            row.update(res)
                            row["error"] = None
                rows.append(row)
                status = row.get("error") or (f"first {fmt(row.get('first_mask_ms'))} ms, "
                                              f"step {fmt(row.get('step_mean_us'))} µs")
                print(f"[{time.perf_counter() - t_start:6.1f}s] {vname:8} {engine:13} {name:8} {status[:120]}",
                      file=sys.stderr, flush=True)
            if worker is not None:
                worker.close()
    return rows, setup, token_bytes


# --------------------------------------------------------------------------------------------
# Pushdown walks: mask time along many walks through the context-free patterns
# --------------------------------------------------------------------------------------------

def print_baseline(rows, path: Path) -> dict:
    """Onyx's warm step on the regular patterns (one DFA each) against the same rows of an
    earlier results file: did the pushdown layer slow them down? Medians and p99s: a mean takes
    in the preemptions of a shared machine."""
    import json

    old = {(r["vocab"], r["pattern"]): r for r in json.loads(Path(path).read_text())["rows"]
           if r["engine"] == "onyx" and not r.get("error")}
    out = []
    print(f"\nRegular patterns, Onyx warm step median and p99 (µs) against {path}:")
    for r in rows:
        o = old.get((r["vocab"], r["pattern"]))
        if r["engine"] != "onyx" or r["pattern"] in PUSHDOWN_PATTERNS or r.get("error") or not o:
            continue
        now, then = r["step_median_us"], o["step_median_us"]
        out.append({"vocab": r["vocab"], "pattern": r["pattern"], "step_median_us": now,
                    "baseline_step_median_us": then, "p99_us": r["step_p99_us"],
                    "baseline_p99_us": o["step_p99_us"], "ratio": now / then,
                    "p99_ratio": r["step_p99_us"] / o["step_p99_us"]})
        print(f"  {r['vocab']:8} {r['pattern']:9} now {fmt(now)} (p99 {fmt(r['step_p99_us'])})   "
              f"before {fmt(then)} (p99 {fmt(o['step_p99_us'])})   now/before {now / then:.2f}× "
              f"(p99 {r['step_p99_us'] / o['step_p99_us']:.2f}×)")
    return {"baseline": str(path), "rows": out}


def _extension_sha256() -> str | None:
    """The sha256 of the loaded Onyx extension module: which build the numbers are of."""
    import hashlib

    import onyx._grammar as ext

    try:
        return hashlib.sha256(Path(ext.__file__).read_bytes()).hexdigest()
    except (OSError, TypeError):
        return None


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "one vocabulary (qwen2 unless --vocab), fewer repetitions")
    ap.add_argument("--vocab", default=None, help=f"comma-separated subset of {','.join(VOCABS)}")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)}")
    ap.add_argument("--patterns", default=None, help=f"comma-separated subset of {','.join(p[0] for p in PATTERNS)}")
    ap.add_argument("--task-timeout", type=float, default=180.0, help="seconds one row may take before its worker is killed")
    ap.add_argument("--budget", type=float, default=570.0, help="seconds for the whole bench; rows past it are skipped")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--section", default="main,pushdown",
                    help="main (the table of every pattern), pushdown (walks through the context-free patterns), or both")
    ap.add_argument("--pushdown-vocab", default="qwen2", help="vocabulary of the pushdown walks")
    ap.add_argument("--walks", type=int, default=None, help="random walks per pushdown pattern besides the sample's (4; --quick: 1)")
    ap.add_argument("--walk-len", type=int, default=None, help="tokens per random walk (200; --quick: 50)")
    ap.add_argument("--passes", type=int, default=None, help="warm passes over the pushdown walks")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first pattern's random walks")
    ap.add_argument("--row-budget", type=float, default=60.0,
                    help="seconds one pushdown (engine, pattern) row may spend walking before it walks prefixes")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="an earlier grammar_bench.json: Onyx's regular-pattern steps are compared with it")
    args = ap.parse_args(argv)
    sections = set(args.section.split(","))
    if not sections or sections - {"main", "pushdown"}:
        ap.error("--section takes main, pushdown or main,pushdown")

    vocabs = args.vocab.split(",") if args.vocab else (["qwen2"] if args.quick else list(VOCABS))
    engines = args.engines.split(",")
    pats = [p for p in PATTERNS if not args.patterns or p[0] in args.patterns.split(",")]
    for v in vocabs:
        if v not in VOCABS:
            ap.error(f"unknown vocabulary {v!r}; known: {', '.join(VOCABS)}")
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; known: {', '.join(ENGINES)}")
    reps = ({"first": 3, "eager": 3, "walks": 10, "min_samples": 300, "budget_s": 1.5} if args.quick
            else {"first": 7, "eager": 5, "walks": 30, "min_samples": 3000, "budget_s": 4.0})
    out_dir = harness.out_dir(args.out)

    pd_opts = {"random_walks": args.walks if args.walks is not None else (1 if args.quick else 4),
               "walk_len": args.walk_len or (50 if args.quick else 200),
               "passes": args.passes or (2 if args.quick else 5), "seed": args.seed,
               "row_budget_s": args.row_budget}
    pd_pats = [p for p in pats if p[0] in PUSHDOWN_PATTERNS]
    pd_engines = [e for e in engines if e in PD_ENGINES]

    t_start = time.perf_counter()
    overhead = harness.timer_overhead_ns()
    load_before = harness.loadavg()
    rows, setup, targets, baseline = [], {}, [], None
    if "main" in sections:
        rows, setup, token_bytes = run_rows(vocabs, engines, pats, reps, args.task_timeout, args.budget, t_start)
        compare_masks(rows, token_bytes)
        add_ratios(rows)
        targets = evaluate_targets(rows)
    pushdown = None
    if "pushdown" in sections and pd_pats and pd_engines:
        pd_rows, walk_info = run_pushdown_rows(args.pushdown_vocab, pd_engines, pd_pats, pd_opts, args.task_timeout)
        pushdown = {"vocab": args.pushdown_vocab, "options": pd_opts, "walks": walk_info, "rows": pd_rows,
                    "targets": evaluate_pushdown(pd_rows)}
    if rows:
        print()
        print_table(rows, targets)
        if args.baseline:
            baseline = print_baseline(rows, args.baseline)
    if pushdown:
        print_pushdown(pushdown["rows"], pushdown["walks"], pushdown["targets"], pd_opts["passes"])

    result = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": harness.machine_meta(),
            "versions": peers.versions(),
            "onyx_extension_sha256": _extension_sha256(),
            "args": vars(args),
            "reps": reps,
            "timer_overhead_ns": overhead,
            "loadavg_before_after": [load_before, harness.loadavg()],
            "setup": setup,
            "total_s": time.perf_counter() - t_start,
            "notes": [
                "step = next-token mask + advance (the final state: mask only), timed per step with "
                "perf_counter_ns on warm state; timer overhead is not subtracted",
                "Onyx token_bitmask hands out a precomputed read-only view (no copy); peers fill a "
                "caller buffer. onyx_breakdown.mask_copy_mean_us adds a copy into a buffer",
                "xgrammar: GrammarCompiler(cache_enabled=False); masks via fill_next_token_bitmask "
                "into an int32 numpy array (DLPack). When torch is not installed a stand-in module "
                "replaces it inside the xgrammar worker only",
                "llguidance: LLMatcher.unsafe_compute_mask_ptr + consume_token; no eager build",
                "outlines-core: Guide.write_mask_into + advance(return_tokens=False); memory is the "
                "pickled Index size",
                "JSON schemas: compact output for every engine (no whitespace, ',' and ':')",
                "GBNF: llama.cpp's grammar files as they are for Onyx (compile_gbnf) and llguidance "
                "(llguidance.grammar_from('gbnf', ...)); for xgrammar (compile_grammar) empty "
                "alternatives are written \"\" (peers.xgrammar_ebnf)",
                "pushdown: per step the mask and the advance are timed apart (mask = token_bitmask / "
                "fill_next_token_bitmask / unsafe_compute_mask_ptr); walks are made from Onyx's masks "
                "and replayed by every engine; an engine that rejects a token stops that walk there",
            ],
        },
        "targets": targets,
        "rows": rows,
        "regular_vs_baseline": baseline,
        "pushdown": pushdown,
    }
    harness.save_results(out_dir, "grammar_bench", result,
                         None if args.no_plot or not rows else lambda res, path: plot(res["rows"], path))
    print(f"total {time.perf_counter() - t_start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

