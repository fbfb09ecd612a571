#!/usr/bin/env python3
"""Repair benchmark: Onyx's `Grammar.repair`, and json_repair at its best, on broken LLM JSON.

Four parts:
  * length   – repair time (default cost model) against text length: JSON documents of
               100 B .. 8 KB (an array of records) with a fixed number of random byte errors;
  * grammar  – repair time against grammar size (DFA states, `g.num_states`): small regexes,
               JSON Schemas up to a ~6,600-state invoice, all on ~1 KB inputs with 3 errors;
  * anytime  – on hard inputs (heavily corrupted JSON, printable garbage), the answer at fixed
               deadlines (1, 5, 20, 100 ms): its cost, the proven lower bound, the gap between
               them, the cost against the optimum (searched without a deadline), and how long the
               call really took;
  * compare  – both broken-JSON corpora (bench/repair_corpus.py: `train`, which the default's
               weights were fitted on, and `test`) through Onyx's default; json_repair without a
               schema and with `schema=` (`standard`, `salvage`); json_repair (plain, salvage) then
               Onyx; and an oracle: Onyx with the edit costs (unit, swap, trim) picked per case.
               Each: shares of strict JSON, schema-valid (format checker on) and intended
               outputs, calls that raised, time per repair.

The machine is shared and noisy: read ratios and trends, not absolute numbers. Grammars are
compiled once, outside the timings (their compile times are reported separately).

    python bench/repair_bench.py                  # ~2-3 minutes
    python bench/repair_bench.py --quick          # ~30 s
    python bench/repair_bench.py --parts compare  # the comparison alone
    python bench/repair_bench.py --out /tmp/rb --no-plot

Results: a table on stdout, `repair_bench.json` and `repair_bench.png` in `--out` (default
bench/results). Needs `json-repair` for the comparison (the bench extra); without it that part
reports only Onyx.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from bench import repair_corpus  # noqa: E402
from bench.corpus import INVOICE, RECORDS  # noqa: E402
from bench.repair_inputs import GRAMMARS, garbage, gen_invoice, gen_records, inject_errors  # noqa: E402

# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def timed(fn, reps: int, budget_s: float = 2.0):
    """(result of the last call, median seconds, min seconds): `harness.timed`."""
    result, times = harness.timed(fn, reps, budget_s)
    return result, statistics.median(times), min(times)


def fmt_ms(s: float | None) -> str:
    if s is None:
        return "-"
    ms = s * 1e3
    return f"{ms:.3f}" if ms < 1 else (f"{ms:.2f}" if ms < 10 else f"{ms:.1f}")


def bench_length(vocab, quick: bool, seed: int) -> list[dict]:
    g = vocab.compile_json_schema(RECORDS)
    sizes = [100, 500, 2000, 8000] if quick else [100, 250, 500, 1000, 2000, 4000, 8000]
    errors = [3] if quick else [1, 3, 10]
    docs = 2 if quick else 5
    reps = 3 if quick else 5
    rows = []
    for k in errors:
        for size in sizes:
            for d in range(docs):
                rng = random.Random(f"{seed}/length/{k}/{size}/{d}")
                text = inject_errors(gen_records(rng, size), k, rng, g)
                r, med, best = timed(lambda: g.repair(text), reps)
                rows.append({"errors": k, "target_bytes": size, "doc": d, "bytes": len(text.encode()),
                             "status": r.status, "cost": r.cost, "expansions": r.expansions,
                             "time_median_s": med, "time_min_s": best})
    return rows


def summarize_length(rows: list[dict]) -> list[dict]:
    out = []
    for k in sorted({r["errors"] for r in rows}):
        for size in sorted({r["target_bytes"] for r in rows}):
            sel = [r for r in rows if r["errors"] == k and r["target_bytes"] == size]
            out.append({
                "errors": k, "target_bytes": size,
                "bytes_median": statistics.median(r["bytes"] for r in sel),
                "time_median_s": statistics.median(r["time_median_s"] for r in sel),
                "time_max_s": max(r["time_median_s"] for r in sel),
                "cost_median": statistics.median(r["cost"] for r in sel),
                "expansions_median": statistics.median(r["expansions"] for r in sel),
                "all_optimal": all(r["status"] == "optimal" for r in sel),
            })
    return out


def bench_grammar_size(vocab, quick: bool, seed: int) -> list[dict]:
    target = 1000
    docs = 2 if quick else 5
    reps = 3 if quick else 5
    rows = []
    for name, (kind, spec, gen) in GRAMMARS.items():
        t = time.perf_counter()
        g = vocab.compile_regex(spec) if kind == "regex" else vocab.compile_json_schema(spec)
        compile_s = time.perf_counter() - t
        times, costs, lengths, optimal = [], [], [], True
        for d in range(docs):
            rng = random.Random(f"{seed}/grammar/{name}/{d}")
            valid = gen(rng, target)
            assert g.validate(valid).valid, (name, valid[:80])
            text = inject_errors(valid, 3, rng, g)
            r, med, _ = timed(lambda: g.repair(text), reps)
            times.append(med)
            costs.append(r.cost)
            lengths.append(len(text.encode()))
            optimal &= r.status == "optimal"
        rows.append({"grammar": name, "kind": kind, "num_states": g.num_states, "compile_s": compile_s,
                     "bytes_median": statistics.median(lengths), "time_median_s": statistics.median(times),
                     "time_max_s": max(times), "us_per_byte": statistics.median(times) / statistics.median(lengths) * 1e6,
                     "cost_median": statistics.median(costs), "all_optimal": optimal})
    return rows


def anytime_inputs(vocab, quick: bool, seed: int):
    """(name, grammar, text) of inputs whose optimal repair takes well over the deadlines."""
    rng = random.Random(f"{seed}/anytime")
    records = vocab.compile_json_schema(RECORDS)
    order = vocab.compile_json_schema(repair_corpus.TEST_SCHEMAS["order"])
    invoice = vocab.compile_json_schema(INVOICE)
    out = [
        ("records 4 KB, 40 errors", records, inject_errors(gen_records(rng, 4000), 40, rng, records)),
        ("invoice 2 KB, 20 errors", invoice, inject_errors(gen_invoice(rng, 2000), 20, rng, invoice)),
        ("order vs 1 KB garbage", order, garbage(1000, rng)),
    ]
    if not quick:
        out.append(("records 8 KB, 80 errors", records, inject_errors(gen_records(rng, 8000), 80, rng, records)))
    return out


def bench_anytime(vocab, quick: bool, seed: int) -> list[dict]:
    deadlines = [1, 5, 20, 100]
    optimum_deadline_ms = 5_000 if quick else 30_000
    rows = []
    for name, g, text in anytime_inputs(vocab, quick, seed):
        t = time.perf_counter()
        full = g.repair(text, deadline_ms=optimum_deadline_ms)
        full_s = time.perf_counter() - t
        optimum = full.cost if full.status == "optimal" else None
        for ms in deadlines:
            t = time.perf_counter()
            r = g.repair(text, deadline_ms=ms)
            took = time.perf_counter() - t
            rows.append({
                "input": name, "bytes": len(text.encode()), "num_states": g.num_states, "deadline_ms": ms,
                "status": r.status, "cost": r.cost, "lower_bound": r.lower_bound,
                "gap": None if r.cost is None else r.cost - r.lower_bound,
                "optimum": optimum, "optimum_lower_bound": full.lower_bound, "optimum_status": full.status,
                "optimum_time_s": full_s, "cost_over_optimum": (r.cost / optimum) if optimum and r.cost else None,
                "elapsed_ms": took * 1e3, "expansions": r.expansions,
            })
    return rows


def _strict_loads(text: str):
    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=no_constants)


def _judge(text: str | None, case, validator) -> dict:
    """Is the output strict JSON, valid under the schema, the intended value?"""
    out = {"raised": text is None, "json": False, "schema": False, "intended": False}
    if text is None:
        return out
    try:
        value = _strict_loads(text)
    except (ValueError, RecursionError):
        return out
    out["json"] = True
    out["schema"] = validator.is_valid(value)
    out["intended"] = value == case.intended
    return out


# The per-case cost profiles of the earlier bench (edit costs of `Grammar.repair`). Picking, per
# case, the one that gives the intended value needs the answer: the oracle row.
PROFILES = {"unit": {"insert_cost": 1, "delete_cost": 1, "substitute_cost": 1},
            "swap": {"insert_cost": 2, "delete_cost": 1, "substitute_cost": 1},
            "trim": {"insert_cost": 20, "delete_cost": 1, "substitute_cost": 20}}


def compare_methods(json_repair, grammars: dict, schemas: dict) -> dict:
    """name -> make(case) -> a function returning the output text (None when it raises)."""

    def onyx(case):
        return lambda: grammars[case.schema].repair(case.text).text

    methods = {"onyx (default)": onyx}
    if json_repair is None:
        return methods
    from onyx.grammar.repair import repair_json

    def jr(case, **kw):
        def run():
            try:
                return json_repair.repair_json(case.text, **kw)
            except Exception:  # noqa: BLE001 - json_repair raises on what it cannot fit; counted as "raised"
                return None
        return run

    def jr_then_onyx(case, **kw):
        return lambda: repair_json(grammars[case.schema], case.text, **kw).text

    methods["json_repair (no schema)"] = lambda c: jr(c)
    methods["json_repair schema= standard"] = lambda c: jr(c, schema=schemas[c.schema], schema_repair_mode="standard")
    methods["json_repair schema= salvage"] = lambda c: jr(c, schema=schemas[c.schema], schema_repair_mode="salvage")
    methods["json_repair -> onyx"] = lambda c: jr_then_onyx(c)
    methods["json_repair salvage -> onyx"] = lambda c: jr_then_onyx(c, schema=schemas[c.schema])
    return methods


def _summary(name: str, judged: list[dict], times: list[float]) -> dict:
    n = len(judged)
    return {
        "method": name, "cases": n,
        "valid_json_pct": 100 * sum(j["json"] for j in judged) / n,
        "schema_valid_pct": 100 * sum(j["schema"] for j in judged) / n,
        "intended_pct": 100 * sum(j["intended"] for j in judged) / n,
        "intended": sum(j["intended"] for j in judged),
        "raised": sum(j["raised"] for j in judged),
        "time_mean_s": statistics.mean(times), "time_median_s": statistics.median(times),
    }


def bench_compare(vocab, quick: bool) -> dict:
    """Every method on the training and the test corpus (bench/repair_corpus.py)."""
    import jsonschema

    try:
        import json_repair

        jr_version = harness.package_version("json-repair")
    except ImportError:
        json_repair, jr_version = None, None
    checker = jsonschema.FormatChecker()
    reps = 3 if quick else 7
    import onyx

    out: dict = {"json_repair_version": jr_version, "weights": onyx.Grammar.repair_weights()}
    for corpus_name in ("train", "test"):
        schemas, cases = repair_corpus.load(corpus_name)
        validators = {k: jsonschema.Draft202012Validator(s, format_checker=checker) for k, s in schemas.items()}
        grammars = {k: vocab.compile_json_schema(s) for k, s in schemas.items()}
        rows, summary = [], []
        for name, make in compare_methods(json_repair, grammars, schemas).items():
            judged, times = [], []
            for case in cases:
                text, med, _ = timed(make(case), reps, budget_s=0.5)
                j = _judge(text, case, validators[case.schema])
                judged.append(j)
                times.append(med)
                if name == "onyx (default)":  # per-case rows for the default only: the file stays small
                    rows.append({"method": name, "case": case.name, "family": case.family, "output": text,
                                 "time_s": med, **j})
            summary.append(_summary(name, judged, times))
            summary[-1]["missed"] = [c.name for c, j in zip(cases, judged) if not j["intended"]]
        # The oracle: per case, the first edit-cost profile that gives the intended value.
        judged, times = [], []
        for case in cases:
            best = None
            for costs in PROFILES.values():
                g = grammars[case.schema]
                text, med, _ = timed(lambda: g.repair(case.text, **costs).text, reps, budget_s=0.5)
                j = _judge(text, case, validators[case.schema])
                if best is None or (j["intended"] and not best[0]["intended"]):
                    best = (j, med)
            judged.append(best[0])
            times.append(best[1])
        summary.append(_summary("oracle: onyx, per-case edit costs", judged, times))
        summary[-1]["missed"] = [c.name for c, j in zip(cases, judged) if not j["intended"]]
        out[corpus_name] = {"summary": summary, "cases": rows}
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def print_tables(res: dict) -> None:
    for key, fn in (("length_summary", _print_length), ("grammar_size", _print_grammar), ("anytime", _print_anytime),
                    ("compare", _print_compare)):
        if key in res:
            fn(res)


def _print_length(res: dict) -> None:
    print("\n== repair time against text length (records schema, "
          f"{res['grammar_states']['records']} states; median over docs of the median of reps)")
    print(f"{'errors':>6} {'bytes':>6} {'median ms':>10} {'max ms':>8} {'cost':>5} {'expansions':>10} {'optimal':>7}")
    for r in res["length_summary"]:
        print(f"{r['errors']:>6} {r['bytes_median']:>6.0f} {fmt_ms(r['time_median_s']):>10} {fmt_ms(r['time_max_s']):>8} "
              f"{r['cost_median']:>5.0f} {r['expansions_median']:>10.0f} {'yes' if r['all_optimal'] else 'NO':>7}")


def _print_grammar(res: dict) -> None:
    print("\n== repair time against grammar size (~1 KB inputs, 3 errors)")
    print(f"{'grammar':<18} {'states':>6} {'compile ms':>10} {'bytes':>6} {'median ms':>10} {'max ms':>8} {'us/byte':>8} {'cost':>5}")
    for r in res["grammar_size"]:
        print(f"{r['grammar']:<18} {r['num_states']:>6} {fmt_ms(r['compile_s']):>10} {r['bytes_median']:>6.0f} "
              f"{fmt_ms(r['time_median_s']):>10} {fmt_ms(r['time_max_s']):>8} {r['us_per_byte']:>8.2f} {r['cost_median']:>5.0f}")


def _print_anytime(res: dict) -> None:
    print("\n== anytime answers at fixed deadlines (gap = cost - proven lower bound)")
    print(f"{'input':<26} {'deadline':>8} {'took ms':>8} {'status':>8} {'cost':>6} {'lower':>6} {'gap':>6} "
          f"{'optimum':>8} {'cost/opt':>8}")
    for r in res["anytime"]:
        opt = r["optimum"] if r["optimum"] is not None else f">={r['optimum_lower_bound']}"
        ratio = f"{r['cost_over_optimum']:.3f}" if r["cost_over_optimum"] else "-"
        print(f"{r['input']:<26} {r['deadline_ms']:>6}ms {r['elapsed_ms']:>8.1f} {r['status']:>8} {r['cost'] or '-':>6} "
              f"{r['lower_bound']:>6} {r['gap'] if r['gap'] is not None else '-':>6} {opt:>8} {ratio:>8}")
    seen = set()
    for r in res["anytime"]:
        if r["input"] not in seen:
            seen.add(r["input"])
            print(f"  {r['input']}: optimum search without deadline took {r['optimum_time_s'] * 1e3:.0f} ms "
                  f"({r['optimum_status']})")


def _print_compare(res: dict) -> None:
    cmp_ = res["compare"]
    for corpus_name in ("train", "test"):
        part = cmp_[corpus_name]
        n = part["summary"][0]["cases"]
        print(f"\n== broken-JSON {corpus_name} corpus ({n} cases; json-repair "
              f"{cmp_['json_repair_version'] or 'not installed'})")
        print(f"{'method':<34} {'valid JSON':>10} {'schema-valid':>12} {'intended':>9} {'raised':>6} "
              f"{'median ms':>9} {'mean ms':>8}")
        for s in part["summary"]:
            print(f"{s['method']:<34} {s['valid_json_pct']:>9.1f}% {s['schema_valid_pct']:>11.1f}% "
                  f"{s['intended_pct']:>8.1f}% {s['raised']:>6} {fmt_ms(s['time_median_s']):>9} "
                  f"{fmt_ms(s['time_mean_s']):>8}")
        by = {s["method"]: s for s in part["summary"]}
        if "json_repair schema= standard" in by:
            o = by["onyx (default)"]
            for ref in ("json_repair schema= standard", "json_repair schema= salvage", "json_repair (no schema)"):
                j = by[ref]
                print(f"  median time onyx / {ref}: {o['time_median_s'] / j['time_median_s']:.2f}x")
        misses: dict[str, list[str]] = {}
        for c in part["cases"]:
            if c["method"] == "onyx (default)" and not c["intended"]:
                misses.setdefault(c["family"], []).append(c["case"])
        print("  onyx (default) misses the intended value on: "
              + "; ".join(f"{fam} x{len(v)}" for fam, v in sorted(misses.items())))


def plot(res: dict, path: Path):
    plt = harness.pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))

    ax = axes[0][0]
    for k in sorted({r["errors"] for r in res["length_summary"]}):
        sel = [r for r in res["length_summary"] if r["errors"] == k]
        ax.plot([r["bytes_median"] for r in sel], [r["time_median_s"] * 1e3 for r in sel], "o-", label=f"{k} error{'s' if k > 1 else ''}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("text length (bytes)")
    ax.set_ylabel("repair time (ms, median)")
    ax.set_title(f"time vs length (records schema, {res['grammar_states']['records']} states)")
    ax.grid(which="both", alpha=0.3)
    ax.legend()

    ax = axes[0][1]
    rows = res["grammar_size"]
    ax.scatter([r["num_states"] for r in rows], [r["time_median_s"] * 1e3 for r in rows])
    for r in rows:
        ax.annotate(r["grammar"], (r["num_states"], r["time_median_s"] * 1e3), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("DFA states")
    ax.set_ylabel("repair time (ms, median)")
    ax.set_title("time vs grammar size (~1 KB inputs, 3 errors)")
    ax.grid(which="both", alpha=0.3)

    ax = axes[1][0]
    for name in dict.fromkeys(r["input"] for r in res["anytime"]):
        sel = [r for r in res["anytime"] if r["input"] == name]
        ref = sel[0]["optimum"] or sel[0]["optimum_lower_bound"]
        xs = [r["deadline_ms"] for r in sel]
        line, = ax.plot(xs, [r["cost"] / ref for r in sel], "o-", label=f"{name}: cost")
        ax.plot(xs, [r["lower_bound"] / ref for r in sel], "s--", color=line.get_color(), alpha=0.6,
                label=f"{name}: lower bound")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("deadline (ms)")
    ax.set_ylabel("relative to the optimum (1 = optimal)")
    ax.set_title("anytime: cost (above 1) and proven lower bound (below 1)")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center right")

    ax = axes[1][1]
    summ = res["compare"]["test"]["summary"]
    metrics = (("valid_json_pct", "valid JSON"), ("schema_valid_pct", "schema-valid"), ("intended_pct", "intended value"))
    width = 0.8 / len(summ)
    for i, s in enumerate(summ):
        ax.bar([m + (i - (len(summ) - 1) / 2) * width for m in range(len(metrics))],
               [s[k] for k, _ in metrics], width=width, label=s["method"])
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels([label for _, label in metrics])
    ax.set_ylabel("% of test corpus cases")
    ax.set_ylim(0, 105)
    ax.set_title(f"broken-JSON test corpus ({summ[0]['cases']} cases)")
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(axis="y", alpha=0.3)

    return harness.save_figure(fig, path)


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "fewer sizes, documents and repetitions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--parts", default="length,grammar,anytime,compare",
                    help="comma-separated parts to run (default: all four)")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))

    import onyx
    from onyx.models import assets

    out_dir = harness.out_dir(args.out)
    vocab = onyx.Vocabulary.from_gguf(assets.fetch("smollm2"))
    t0 = time.perf_counter()
    load_before = harness.loadavg()
    res: dict = {
        "meta": {
            "quick": args.quick, "seed": args.seed, **harness.machine_meta(), "vocab": "smollm2",
            "onyx": harness.package_version("onyx"), "json_repair": harness.package_version("json-repair"),
        },
        "grammar_states": {"records": vocab.compile_json_schema(RECORDS).num_states},
    }
    for part, key, fn in (("length", "length", bench_length), ("grammar", "grammar_size", bench_grammar_size),
                          ("anytime", "anytime", bench_anytime)):
        if part in parts:
            print(f"running {part} ...", file=sys.stderr, flush=True)
            res[key] = fn(vocab, args.quick, args.seed)
    if "length" in res:
        res["length_summary"] = summarize_length(res["length"])
    if "compare" in parts:
        print("running compare ...", file=sys.stderr, flush=True)
        res["compare"] = bench_compare(vocab, args.quick)
    res["meta"]["seconds"] = time.perf_counter() - t0
    res["meta"]["loadavg_before_after"] = [load_before, harness.loadavg()]

    print_tables(res)
    complete = {"length_summary", "grammar_size", "anytime", "compare"} <= set(res)
    harness.save_results(out_dir, "repair_bench", res, None if args.no_plot or not complete else plot)
    print(f"({res['meta']['seconds']:.0f} s; load average before/after: "
          f"{load_before[0]:.1f} / {res['meta']['loadavg_before_after'][1][0]:.1f} on {res['meta']['cpus']} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
