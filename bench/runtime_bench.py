#!/usr/bin/env python3
"""Runtime benchmark of the decoding engine on the default model (SmolLM2-135M-Instruct), in one run:

  1. decode tok/s, greedy, plain decoding (speculative="baseline"): unconstrained, constrained on a
     full-mask pattern (`(?s:.)*`: every token that can start text is allowed, so the greedy tokens
     are the unconstrained ones and any slowdown is mask work), and on two real constraints (a JSON
     schema, `[a-z ]+`). The configurations are interleaved (A B C D E, then rotated, ...) so all
     see the same machine load; the numbers to read are medians and the paired ratios.
  2. the ratio to the memory-bandwidth floor: the NOTES figure (~47 tok/s, for float32 weights)
     and one computed in this run from the loaded model's parameter bytes (as Onyx holds them:
     4/8-bit) and a numpy read-bandwidth measurement.
  3. paged KV cache vs mlx-lm's cache: `engine.generate(speculative="baseline")` against
     `onyx.models.loader.greedy_generate` (mlx-lm KVCache) on the same prompt and tokens, interleaved with
     the runs of 1; plus bench/cache_bench.py's step-by-step comparison on the same model.
  4. rollback time vs sequence length (bench/cache_bench.py).
  5. prefix sharing: time to first token for a request with a long system prompt, cold, and a
     second request with the same system prompt (cached_prompt_tokens > 0).

    python bench/runtime_bench.py                # full run (about 4-5 minutes on 2 cores)
    python bench/runtime_bench.py --quick --out /tmp/rb

Prints one table, writes runtime_bench.json and runtime_bench.png to --out (default
bench/results). Targets (reported, not asserted): >= 30 tok/s greedy unconstrained; mask work
<= 3% of decode time on the full-mask pattern; paged cache within 5% of mlx-lm; rollback time
flat in the sequence length.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import os  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import onyx  # noqa: E402
from bench.cache_bench import run_cache_bench  # noqa: E402
from bench.corpus import CHARACTER_SCHEMA, JSON_ASK, QUESTIONS, STORY, SYSTEM_PROMPT  # noqa: E402

NOTES_FLOOR_TOK_S = 47.0  # /work/shared/NOTES.md: ~540 MB of f32 weights at ~25 GB/s
NOTES_BANDWIDTH_GBS = 25.0

FULL_MASK = r"(?s:.)*"
LOWER = r"[a-z ]+"

# (key, label, prompt kind, generate options)
CONFIGS = [
    ("unconstrained", "unconstrained", "story", {}),
    ("full_mask", f"regex {FULL_MASK} (full mask)", "story", {"regex": FULL_MASK}),
    ("lower", f"regex {LOWER}", "story", {"regex": LOWER}),
    ("json_schema", "JSON schema (character)", "json", {"json_schema": CHARACTER_SCHEMA}),
]

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def measure_bandwidth(size_mb: int = 256, repeats: int = 7) -> dict:
    """Read bandwidth (GB/s, median of `repeats`) of streaming reductions over a float32 array far
    larger than the caches: numpy max (one thread, SIMD), numpy dot(a, a) (BLAS) and mx.sum."""
    a = np.ones(size_mb * 1024 * 1024 // 4, dtype=np.float32)
    a.max()  # touch the pages
    out = {"array_mb": size_mb}
    b = mx.array(a)
    mx.eval(b)
    for name, fn in (("numpy_max", lambda: a.max()), ("numpy_dot", lambda: np.dot(a, a)),
                     ("mlx_sum", lambda: mx.eval(mx.sum(b)))):
        _, ts = harness.timed(fn, repeats, budget_s=float("inf"))
        out[f"{name}_gbs"] = round(a.nbytes / harness.median(ts) / 1e9, 2)
    del b
    out["best_gbs"] = max(out[k] for k in out if k.endswith("_gbs"))
    return out


def param_bytes(model) -> int:
    from mlx.utils import tree_flatten

    return int(sum(v.nbytes for _, v in tree_flatten(model.parameters())))


# --------------------------------------------------------------------------------------------
# 1 + 3: interleaved decode runs
# --------------------------------------------------------------------------------------------

def run_decode_matrix(engine, prompts: dict, *, max_tokens: int, reps: int, verbose: bool) -> dict:
    """Each rep runs every engine configuration once plus greedy_generate (mlx-lm cache) for
    max_tokens and for 1 token (its prefill, subtracted to get its decode rate), in an order
    rotated per rep. Returns per-configuration samples and medians."""
    from onyx.models.loader import greedy_generate

    loaded = engine.loaded
    names = [c[0] for c in CONFIGS] + ["mlx_lm_greedy"]
    samples = {n: [] for n in names}
    tokens = {n: None for n in names}
    story_ids = prompts["story"]

    def run_engine(cfg, n):
        key, _label, kind, opts = cfg
        r = engine.generate(prompts[kind], max_tokens=n, temperature=0, speculative="baseline", **opts)
        s = r.stats
        return r, {"tok_s": s["tokens_per_s"], "decode_s": s["decode_s"],
                   "completion_tokens": s["completion_tokens"], "ttft_s": s["ttft_s"],
                   "cached_prompt_tokens": s["cached_prompt_tokens"], "finish_reason": r.finish_reason,
                   "valid": r.valid}

    def run_mlx(n):
        t0 = time.perf_counter()
        greedy_generate(loaded, story_ids, 1, stop_at_eos=True)
        t1 = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = greedy_generate(loaded, story_ids, n, stop_at_eos=True)
        tn = time.perf_counter() - t0
        gen = [t for t in out if t not in set(loaded.eos_token_ids)]
        steps = len(out) - 1  # forwards after the prefill's
        return out, {"tok_s": steps / (tn - t1) if tn > t1 and steps > 0 else 0.0, "total_s": tn,
                     "prefill_s": t1, "completion_tokens": len(gen)}

    # warm-up (grammar compile, mask cache, MLX kernels), not recorded
    for cfg in CONFIGS:
        run_engine(cfg, 8)
    run_mlx(8)

    jobs = [("engine", c) for c in CONFIGS] + [("mlx", None)]
    for rep in range(reps):
        order = jobs[rep % len(jobs):] + jobs[:rep % len(jobs)]
        if rep % 2:
            order = order[::-1]
        for kind, cfg in order:
            if kind == "engine":
                r, row = run_engine(cfg, max_tokens)
                samples[cfg[0]].append(row)
                if tokens[cfg[0]] is None:
                    tokens[cfg[0]] = list(r.token_ids)
                name = cfg[0]
            else:
                out, row = run_mlx(max_tokens)
                samples["mlx_lm_greedy"].append(row)
                if tokens["mlx_lm_greedy"] is None:
                    tokens["mlx_lm_greedy"] = list(out)
                name = "mlx_lm_greedy"
            row["rep"] = rep
            if verbose:
                print(f"  rep {rep} {name:<14} {row['tok_s']:7.2f} tok/s  ({row['completion_tokens']} tokens)",
                      flush=True)

    result = {"max_tokens": max_tokens, "reps": reps, "configs": {}}
    labels = {c[0]: c[1] for c in CONFIGS}
    labels["mlx_lm_greedy"] = "mlx-lm KVCache (greedy_generate)"
    for n in names:
        rows = samples[n]
        result["configs"][n] = {
            "label": labels[n],
            "tok_s_median": round(harness.median([r["tok_s"] for r in rows]), 3),
            "tok_s_min": round(min(r["tok_s"] for r in rows), 3),
            "tok_s_max": round(max(r["tok_s"] for r in rows), 3),
            "completion_tokens": rows[0]["completion_tokens"],
            "runs": rows,
            "text_tokens_sample": tokens[n][:16] if tokens[n] else [],
        }

    def paired(a, b):  # median over reps of tok/s(a) / tok/s(b)
        ratios = harness.paired_ratios([x["tok_s"] for x in samples[a]], [y["tok_s"] for y in samples[b]])
        return round(harness.median(ratios), 4)

    base = result["configs"]["unconstrained"]["tok_s_median"]
    result["ratios_vs_unconstrained"] = {
        n: {"ratio_of_medians": round(result["configs"][n]["tok_s_median"] / base, 4) if base else None,
            "median_paired_ratio": paired(n, "unconstrained")}
        for n in names if n != "unconstrained"}
    # the full-mask pattern allows every token the model picks: the same greedy tokens
    result["full_mask_same_tokens"] = tokens["full_mask"] == tokens["unconstrained"]
    eng, ref = tokens["unconstrained"] or [], tokens["mlx_lm_greedy"] or []
    result["paged_vs_mlx_same_tokens"] = eng == [t for t in ref if t not in set(loaded.eos_token_ids)]
    return result


def run_step_interleaved(engine, prompts: dict, *, max_tokens: int, rounds: int, verbose: bool) -> dict:
    """The finest interleaving: the four configurations of CONFIGS run as four live decode loops
    (`onyx.decoding.decode`, the loop `engine.generate` drives, speculative="baseline") on the
    engine's runner, advanced one token each in turn (order rotated every step), each `next()`
    timed. A `next()` is one whole step: queue the forward, the grammar's mask work (overlapping
    it), wait, argmax, advance. Paired per-step ratios constrained/unconstrained at the same
    position (same context length) cancel the machine's drift far better than whole runs."""
    from onyx.decoding import Finish, decode
    from onyx.options import ConstraintSpec, GenerateOptions, Speculation

    def constraint(opts):
        # The engine's own (already warm) grammar and mask cache.
        return engine.constraint(ConstraintSpec.parse(opts.get("regex"), opts.get("json_schema")))

    step_times = {c[0]: [] for c in CONFIGS}  # per round: list of per-step seconds
    tokens = {c[0]: 0 for c in CONFIGS}
    for rnd in range(rounds):
        gens = {}
        for key, _label, kind, opts in CONFIGS:
            options = GenerateOptions(max_tokens=max_tokens, speculation=Speculation(mode="baseline"))
            gens[key] = decode(engine.runner, prompts[kind], options, constraint=constraint(opts))
        for key, gen in gens.items():  # first step = prefill + first token: not timed
            ev = next(gen)
            if isinstance(ev, Finish):
                gens[key] = None
        times = {k: [] for k in gens}
        order = list(gens)
        step = 0
        try:
            while any(g is not None for g in gens.values()):
                rot = order[step % len(order):] + order[:step % len(order)]
                for key in (rot if step % 2 == 0 else rot[::-1]):
                    gen = gens[key]
                    if gen is None:
                        continue
                    t0 = time.perf_counter()
                    ev = next(gen, None)
                    dt = time.perf_counter() - t0
                    if ev is None or isinstance(ev, Finish):
                        gens[key] = None
                        gen.close()
                        continue
                    times[key].append(dt)
                step += 1
        finally:
            for gen in gens.values():
                if gen is not None:
                    gen.close()
        for k in times:
            step_times[k].append(times[k])
            tokens[k] += len(times[k])
        if verbose:
            print("  round " + str(rnd) + ": " + ", ".join(
                f"{k} {len(v)} steps {1e3 * harness.median(v):.1f} ms" for k, v in times.items()), flush=True)

    res = {"max_tokens": max_tokens, "rounds": rounds, "configs": {}}
    for key, label, _kind, _opts in CONFIGS:
        flat = [t for r in step_times[key] for t in r]
        res["configs"][key] = {"label": label, "steps": len(flat),
                               "median_step_ms": round(1e3 * harness.median(flat), 3),
                               "tok_s_median_step": round(1 / harness.median(flat), 3),
                               "tok_s_mean": round(len(flat) / sum(flat), 3),
                               # the fastest decile: what the loop does when the machine is quiet
                               "p10_step_ms": round(1e3 * float(np.percentile(flat, 10)), 3),
                               "tok_s_p10_step": round(1 / float(np.percentile(flat, 10)), 3)}
        if key == "unconstrained":
            continue
        paired, s_c, s_u = [], 0.0, 0.0
        for rc, ru in zip(step_times[key], step_times["unconstrained"]):
            for tc, tu in zip(rc, ru):  # same step index: same context length
                paired.append(tc / tu)
                s_c += tc
                s_u += tu
        res["configs"][key]["median_paired_step_ratio"] = round(harness.median(paired), 4)
        res["configs"][key]["sum_time_ratio"] = round(s_c / s_u, 4) if s_u else None
        res["configs"][key]["overhead"] = round(harness.median(paired) - 1.0, 4)
    return res


# --------------------------------------------------------------------------------------------
# 5: prefix-sharing time to first token
# --------------------------------------------------------------------------------------------

def run_prefix_ttft(engine, *, reps: int, verbose: bool) -> dict:
    """For each rep a fresh system prompt (a unique first line, so nothing is cached): request 1
    cold, request 2 with the same system prompt and another question. max_tokens=1, so total_s is
    the wall time to the first token (ttft_s is the engine's prefill of the prompt but its last
    token)."""
    rows = []
    for rep in range(reps):
        system = f"Session {time.time_ns()}-{rep}.\n" + SYSTEM_PROMPT
        out = {}
        for which, q in (("cold", QUESTIONS[(2 * rep) % len(QUESTIONS)]),
                         ("warm", QUESTIONS[(2 * rep + 1) % len(QUESTIONS)])):
            ids = engine.chat_ids([{"role": "system", "content": system}, {"role": "user", "content": q}])
            r = engine.generate(ids, max_tokens=1, temperature=0, speculative="baseline")
            out[which] = {"prompt_tokens": len(ids), "ttft_s": r.stats["ttft_s"], "total_s": r.stats["total_s"],
                          "cached_prompt_tokens": r.stats["cached_prompt_tokens"]}
        rows.append(out)
        if verbose:
            print(f"  rep {rep}: cold {1e3 * out['cold']['total_s']:.1f} ms ({out['cold']['prompt_tokens']} tokens, "
                  f"{out['cold']['cached_prompt_tokens']} cached), warm {1e3 * out['warm']['total_s']:.1f} ms "
                  f"({out['warm']['cached_prompt_tokens']} cached)", flush=True)
    med = lambda w, k: harness.median([r[w][k] for r in rows])  # noqa: E731
    res = {"reps": rows, "system_prompt_tokens_approx": rows[0]["cold"]["prompt_tokens"]}
    for w in ("cold", "warm"):
        res[f"{w}_total_ms"] = round(1e3 * med(w, "total_s"), 2)
        res[f"{w}_ttft_ms"] = round(1e3 * med(w, "ttft_s"), 2)
        res[f"{w}_prompt_tokens"] = rows[0][w]["prompt_tokens"]
        res[f"{w}_cached_prompt_tokens"] = int(med(w, "cached_prompt_tokens"))
    res["speedup_total"] = round(res["cold_total_ms"] / res["warm_total_ms"], 2) if res["warm_total_ms"] else None
    return res


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def rollback_flatness(rows) -> dict:
    """Log-log slope of rollback time vs length (0 = flat, 1 = linear) for each n, and the ratio
    longest/shortest length."""
    out = {}
    lengths = np.array([r["length"] for r in rows], dtype=float)
    for k in (1, 8, 24):
        t = np.array([r[f"rollback_{k}_us"] for r in rows], dtype=float)
        slope = float(np.polyfit(np.log(lengths), np.log(np.maximum(t, 1e-3)), 1)[0]) if len(rows) > 1 else 0.0
        out[f"n{k}_loglog_slope"] = round(slope, 3)
        out[f"n{k}_longest_over_shortest"] = round(float(t[-1] / t[0]), 3) if t[0] > 0 else None
    # the decision uses the summed time of n = 1, 8, 24 (single µs-scale timings are noisy)
    total = np.array([sum(r[f"rollback_{k}_us"] for k in (1, 8, 24)) for r in rows], dtype=float)
    out["sum_loglog_slope"] = (round(float(np.polyfit(np.log(lengths), np.log(total), 1)[0]), 3)
                               if len(rows) > 1 else 0.0)
    out["sum_longest_over_shortest"] = round(float(total[-1] / total[0]), 3)
    out["flat"] = out["sum_loglog_slope"] < 0.2  # 64x longer costs < 2.3x: no growth with length
    return out


def build_table(res: dict) -> tuple[list[tuple], dict]:
    rows, targets = [], {}
    d = res["decode"]
    c = d["configs"]
    rv = d["ratios_vs_unconstrained"]
    unc = c["unconstrained"]["tok_s_median"]
    rows.append(("1. decode (greedy, baseline)", "", "", ""))
    for key in ("unconstrained", "full_mask", "lower", "json_schema"):
        x = c[key]
        extra = "" if key == "unconstrained" else (
            f"  ratio {rv[key]['ratio_of_medians']:.3f} (paired {rv[key]['median_paired_ratio']:.3f})")
        rows.append((f"   {x['label']}", f"{x['tok_s_median']:.2f} tok/s [{x['tok_s_min']:.1f}-{x['tok_s_max']:.1f}], "
                     f"{x['completion_tokens']} tok{extra}", "", ""))
    targets["greedy_unconstrained_tok_s"] = {"value": unc, "target": ">= 30 tok/s", "holds": unc >= 30}
    rows.append(("   target: unconstrained >= 30 tok/s", f"{unc:.2f}", ">= 30", _yn(unc >= 30)))
    si = res["step_interleaved"]["configs"]
    rows.append(("   step-interleaved loops, median step ms", ", ".join(
        f"{k} {si[k]['median_step_ms']:.1f}" for k in ("unconstrained", "full_mask", "lower", "json_schema")), "", ""))
    rows.append(("   same, fastest-decile step (quiet machine)", ", ".join(
        f"{k} {si[k]['p10_step_ms']:.1f} ms = {si[k]['tok_s_p10_step']:.1f} tok/s"
        for k in ("unconstrained", "full_mask")), "", ""))
    ov = si["full_mask"]["overhead"]
    ov_run = 1.0 - rv["full_mask"]["median_paired_ratio"]
    targets["full_mask_overhead"] = {"value": ov, "sum_time_overhead": round(si["full_mask"]["sum_time_ratio"] - 1, 4),
                                     "run_level_paired_overhead": round(ov_run, 4),
                                     "target": "<= 3%", "holds": ov <= 0.03,
                                     "same_tokens": d["full_mask_same_tokens"],
                                     "measure": "median over steps of step time (full mask) / step time "
                                                "(unconstrained), step-interleaved"}
    rows.append(("   target: full-mask overhead <= 3%",
                 f"{100 * ov:+.1f}% per step (time sums {100 * (si['full_mask']['sum_time_ratio'] - 1):+.1f}%; "
                 f"whole runs {100 * ov_run:+.1f}%), same tokens {d['full_mask_same_tokens']}",
                 "<= 3%", _yn(ov <= 0.03)))
    for key in ("lower", "json_schema"):
        rows.append((f"   overhead {c[key]['label']}",
                     f"{100 * si[key]['overhead']:+.1f}% per step (time sums {100 * (si[key]['sum_time_ratio'] - 1):+.1f}%; "
                     f"whole runs {100 * (1 - rv[key]['median_paired_ratio']):+.1f}%)", "", ""))

    b = res["bandwidth"]
    rows.append(("2. bandwidth floor", "", "", ""))
    rows.append(("   model parameter bytes", f"{res['model']['param_bytes'] / 1e6:.1f} MB ({res['model']['dtype']})", "", ""))
    rows.append(("   read bandwidth (this run)", f"numpy max {b['numpy_max_gbs']:.1f}, numpy dot {b['numpy_dot_gbs']:.1f}, "
                 f"mx.sum {b['mlx_sum_gbs']:.1f} GB/s", "", ""))
    f = res["floor"]
    rows.append(("   floor NOTES (float32 weights: 25 GB/s, 540 MB)", f"{NOTES_FLOOR_TOK_S:.1f} tok/s; unconstrained = "
                 f"{f['ratio_to_notes_floor']:.2f} of it", "", ""))
    rows.append(("   floor this run (best bandwidth)", f"{f['floor_tok_s_measured']:.1f} tok/s "
                 f"({f['floor_ms_measured']:.1f} ms/token); unconstrained = {f['ratio_to_measured_floor']:.2f} of it",
                 "", ""))

    p = res["paged_vs_mlx"]
    rows.append(("3. paged vs mlx-lm cache", "", "", ""))
    rows.append(("   engine (paged) vs greedy_generate", f"{p['engine_tok_s']:.2f} vs {p['mlx_lm_tok_s']:.2f} tok/s, "
                 f"ratio {p['ratio_of_medians']:.3f} (paired {p['median_paired_ratio']:.3f}), "
                 f"same tokens {p['same_tokens']}", "paired >= 0.95", _yn(p["median_paired_ratio"] >= 0.95)))
    for r in res["cache_bench"]["decode"]:
        rows.append((f"   cache_bench step, {r['prompt_len']}-tok prompt",
                     f"paged {r['paged_tok_per_s']:.2f} vs mlx-lm {r['mlx_lm_tok_per_s']:.2f} tok/s, "
                     f"paired step ratio {r['median_paired_step_time_ratio']:.3f}, same tokens {r['same_tokens']}",
                     "<= 1.05", _yn(r["median_paired_step_time_ratio"] <= 1.05)))
    ok = p["median_paired_ratio"] >= 0.95 and all(r["median_paired_step_time_ratio"] <= 1.05
                                                 for r in res["cache_bench"]["decode"])
    targets["paged_within_5pct_of_mlx"] = {"engine_ratio_paired": p["median_paired_ratio"],
                                           "engine_ratio_of_medians": p["ratio_of_medians"],
                                           "cache_bench_step_ratios": [r["median_paired_step_time_ratio"]
                                                                       for r in res["cache_bench"]["decode"]],
                                           "target": "within 5% (or faster)", "holds": ok}

    rows.append(("4. rollback (µs, median; n = tokens rolled back)", "", "", ""))
    for r in res["cache_bench"]["rollback"]:
        rows.append((f"   length {r['length']}", f"n=1 {r['rollback_1_us']:.1f}, n=8 {r['rollback_8_us']:.1f}, "
                     f"n=24 {r['rollback_24_us']:.1f}; mlx-lm trim n=8 {r['mlx_trim_8_us']:.1f}", "", ""))
    fl = res["rollback_flatness"]
    rows.append(("   target: flat in length", f"log-log slopes n=1 {fl['n1_loglog_slope']:+.2f}, "
                 f"n=8 {fl['n8_loglog_slope']:+.2f}, n=24 {fl['n24_loglog_slope']:+.2f}; summed "
                 f"{fl['sum_loglog_slope']:+.2f} (longest/shortest x{fl['sum_longest_over_shortest']:.2f})",
                 "slope < 0.2", _yn(fl["flat"])))
    targets["rollback_flat"] = {"sum_loglog_slope": fl["sum_loglog_slope"],
                                "sum_longest_over_shortest": fl["sum_longest_over_shortest"],
                                "target": "log-log slope of time vs length < 0.2", "holds": fl["flat"]}

    t = res["prefix_ttft"]
    rows.append(("5. prefix sharing (repeated system prompt)", "", "", ""))
    rows.append(("   cold request", f"{t['cold_total_ms']:.1f} ms to first token (prefill {t['cold_ttft_ms']:.1f} ms), "
                 f"{t['cold_prompt_tokens']} prompt tokens, {t['cold_cached_prompt_tokens']} cached", "", ""))
    rows.append(("   same system prompt again", f"{t['warm_total_ms']:.1f} ms (prefill {t['warm_ttft_ms']:.1f} ms), "
                 f"{t['warm_prompt_tokens']} prompt tokens, {t['warm_cached_prompt_tokens']} cached; "
                 f"x{t['speedup_total']:.1f}", "cached > 0", _yn(t["warm_cached_prompt_tokens"] > 0)))
    pr = res["cache_bench"]["prefix_reuse"]
    rows.append(("   cache_bench prefix reuse", f"{pr['prefix_reuse_ms']:.1f} vs {pr['full_prefill_ms']:.1f} ms "
                 f"({pr['system_len']} cached + {pr['question_len']} new; x{pr['speedup']:.1f})", "", ""))
    m = res["meta"]
    rows.append(("load average start / end", f"{m['loadavg_start']} / {m['loadavg_end']}", "", ""))
    rows.append(("wall time", f"{m['wall_s']:.0f} s", "", ""))
    return rows, targets


def _yn(ok: bool) -> str:
    return "yes" if ok else "NO"


def print_table(rows) -> None:
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"\n{'quantity':<{w0}}  {'value':<{w1}}  {'target':<14} holds")
    print("-" * (w0 + w1 + 24))
    for r in rows:
        print(f"{r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]:<14} {r[3]}")


def plot(res: dict, path: Path) -> bool:
    plt = harness.pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(2, 2, figsize=(13, 9))
    c = res["decode"]["configs"]
    keys = ["unconstrained", "full_mask", "lower", "json_schema", "mlx_lm_greedy"]
    labels = ["unconstrained", "(?s:.)*\nfull mask", "[a-z ]+", "JSON\nschema", "mlx-lm\nKVCache"]
    med = [c[k]["tok_s_median"] for k in keys]
    lo = [c[k]["tok_s_median"] - c[k]["tok_s_min"] for k in keys]
    hi = [c[k]["tok_s_max"] - c[k]["tok_s_median"] for k in keys]
    a = ax[0, 0]
    a.bar(labels, med, yerr=[lo, hi], color=["C0", "C1", "C2", "C3", "C4"], capsize=4)
    si = res["step_interleaved"]["configs"]
    a.plot(labels[:4], [si[k]["tok_s_median_step"] for k in keys[:4]], "kD", label="step-interleaved, 1 / median step")
    a.plot(labels[:4], [si[k]["tok_s_p10_step"] for k in keys[:4]], "k^", label="step-interleaved, 1 / p10 step")
    a.axhline(NOTES_FLOOR_TOK_S, color="k", ls="--", label=f"bandwidth floor, NOTES ({NOTES_FLOOR_TOK_S:.0f})")
    a.axhline(res["floor"]["floor_tok_s_measured"], color="gray", ls=":",
              label=f"bandwidth floor, this run ({res['floor']['floor_tok_s_measured']:.0f})")
    a.axhline(30, color="r", ls="-.", lw=0.8, label="target 30 tok/s")
    a.set_ylabel("decode tok/s (median, min-max)")
    a.set_title("1-3. greedy decode, speculative=baseline")
    a.legend(fontsize=8)
    a = ax[0, 1]
    cb = res["cache_bench"]["decode"]
    xs = np.arange(len(cb) + 1)
    mlx_v = [res["paged_vs_mlx"]["mlx_lm_tok_s"]] + [r["mlx_lm_tok_per_s"] for r in cb]
    pag_v = [res["paged_vs_mlx"]["engine_tok_s"]] + [r["paged_tok_per_s"] for r in cb]
    a.bar(xs - 0.2, mlx_v, 0.4, label="mlx-lm KVCache")
    a.bar(xs + 0.2, pag_v, 0.4, label="paged (Onyx)")
    a.set_xticks(xs, ["engine vs\ngreedy_generate"] + [f"cache_bench\n{r['prompt_len']}-tok prompt" for r in cb])
    a.set_ylabel("tok/s")
    a.set_title("3. paged vs mlx-lm cache")
    a.legend(fontsize=8)
    a = ax[1, 0]
    rb = res["cache_bench"]["rollback"]
    ls = [r["length"] for r in rb]
    for k in (1, 8, 24):
        a.plot(ls, [r[f"rollback_{k}_us"] for r in rb], "o-", label=f"paged rollback n={k}")
    a.plot(ls, [r["mlx_trim_8_us"] for r in rb], "s--", label="mlx-lm trim n=8")
    a.set_xscale("log", base=2)
    a.set_ylim(bottom=0)
    a.set_xlabel("sequence length (tokens)")
    a.set_ylabel("µs (median)")
    a.set_title("4. rollback time vs length (30 layers)")
    a.legend(fontsize=8)
    a = ax[1, 1]
    t = res["prefix_ttft"]
    a.bar(["cold", "same system\nprompt again"], [t["cold_total_ms"], t["warm_total_ms"]], color=["C3", "C2"])
    a.set_ylabel("time to first token (ms, median)")
    a.set_title(f"5. prefix sharing: {t['cold_prompt_tokens']}-token prompt, "
                f"{t['warm_cached_prompt_tokens']} cached")
    fig.suptitle(f"Onyx runtime bench: {res['model']['name']} ({res['model']['dtype']}), "
                 f"load avg {res['meta']['loadavg_start']}", fontsize=10)
    harness.save_figure(fig, path)
    return True


# --------------------------------------------------------------------------------------------

def run(quick: bool = False, out_dir: Path | None = None, *, max_tokens: int | None = None,
        reps: int | None = None, verbose: bool = True) -> dict:
    t_start = time.perf_counter()
    out_dir = Path(out_dir) if out_dir is not None else harness.RESULTS
    max_tokens = max_tokens or (24 if quick else 128)
    reps = reps or (2 if quick else 5)
    from onyx.cpu.blas import blas_status

    meta = {"quick": quick, "machine": platform.machine(), "python": platform.python_version(),
            "mlx": mx.__version__, "cpu_count": os.cpu_count(), "loadavg_start": harness.loadavg(),
            "blas": str(blas_status())}
    if verbose:
        print(f"load average {meta['loadavg_start']}; loading the engine...", flush=True)
    t0 = time.perf_counter()
    engine = onyx.Engine()
    loaded = engine.loaded
    model_info = {"name": loaded.name, "dtype": loaded.dtype, "device": loaded.device,
                  "vocab_size": loaded.vocab_size, "param_bytes": param_bytes(loaded.model),
                  "load_s": round(time.perf_counter() - t0, 2)}

    if verbose:
        print("measuring read bandwidth...", flush=True)
    bw = measure_bandwidth(128 if quick else 256, 3 if quick else 7)

    prompts = {"story": engine.chat_ids([{"role": "user", "content": STORY}]),
               "json": engine.chat_ids([{"role": "user", "content": JSON_ASK}])}
    if verbose:
        print(f"decode runs: {reps} reps x {len(CONFIGS) + 1} configurations, max_tokens={max_tokens}", flush=True)
    decode_res = run_decode_matrix(engine, prompts, max_tokens=max_tokens, reps=reps, verbose=verbose)

    if verbose:
        print("step-interleaved decode loops (paired per-step ratios)...", flush=True)
    steps_res = run_step_interleaved(engine, prompts, max_tokens=max_tokens, rounds=1 if quick else 2,
                                     verbose=verbose)

    unc = decode_res["configs"]["unconstrained"]["tok_s_median"]
    floor_ms = 1e3 * model_info["param_bytes"] / (bw["best_gbs"] * 1e9)
    floor = {"notes_floor_tok_s": NOTES_FLOOR_TOK_S, "notes_bandwidth_gbs": NOTES_BANDWIDTH_GBS,
             "bandwidth_gbs_used": bw["best_gbs"], "param_bytes": model_info["param_bytes"],
             "floor_ms_measured": round(floor_ms, 2), "floor_tok_s_measured": round(1e3 / floor_ms, 2),
             "floor_tok_s_notes_bandwidth": round(NOTES_BANDWIDTH_GBS * 1e9 / model_info["param_bytes"], 2),
             "ratio_to_notes_floor": round(unc / NOTES_FLOOR_TOK_S, 3),
             "ratio_to_measured_floor": round(unc * floor_ms / 1e3, 3),
             "note": "bytes per token = all parameters once (the tied embedding is read whole as the "
                     "vocabulary head); KV reads (< 10 MB here) ignored"}

    mlx_rows = decode_res["configs"]["mlx_lm_greedy"]
    eng_rows = decode_res["configs"]["unconstrained"]
    paged = {"engine_tok_s": eng_rows["tok_s_median"], "mlx_lm_tok_s": mlx_rows["tok_s_median"],
             "ratio_of_medians": round(eng_rows["tok_s_median"] / mlx_rows["tok_s_median"], 4),
             "median_paired_ratio": decode_res["ratios_vs_unconstrained"]["mlx_lm_greedy"]["median_paired_ratio"],
             "same_tokens": decode_res["paged_vs_mlx_same_tokens"],
             "note": "engine decode tok/s (Result.stats) vs greedy_generate's (n-1)/(t(n) - t(1)); "
                     "ratio = engine / mlx-lm"}
    if paged["median_paired_ratio"]:
        paged["median_paired_ratio"] = round(1.0 / paged["median_paired_ratio"], 4)  # engine / mlx-lm

    if verbose:
        print("cache_bench (paged vs mlx-lm steps, prefix reuse, rollback)...", flush=True)
    cb_res = run_cache_bench(
        loaded.model, model_name=f"{loaded.name} ({loaded.dtype})", quick=quick,
        decode_configs=[(16, 16)] if quick else [(16, 96), (512, 48)],
        rollback_lengths=[64, 1024] if quick else [64, 256, 1024, 4096],
        write_json=False, verbose=verbose)

    if verbose:
        print("prefix sharing (time to first token)...", flush=True)
    ttft = run_prefix_ttft(engine, reps=2 if quick else 3, verbose=verbose)

    res = {"meta": meta, "model": model_info, "bandwidth": bw, "decode": decode_res, "floor": floor,
           "paged_vs_mlx": paged, "step_interleaved": steps_res, "cache_bench": cb_res, "rollback_flatness": rollback_flatness(cb_res["rollback"]),
           "prefix_ttft": ttft}
    meta["loadavg_end"] = harness.loadavg()
    meta["wall_s"] = round(time.perf_counter() - t_start, 1)
    rows, targets = build_table(res)
    res["targets"] = targets
    res["table"] = [list(r) for r in rows]
    print_table(rows)
    harness.save_results(out_dir, "runtime_bench", res, plot)
    return res


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "few tokens and reps (smoke test)")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None)
    a = ap.parse_args(argv)
    run(a.quick, a.out, max_tokens=a.max_tokens, reps=a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
