#!/usr/bin/env python3
"""JSON Schema coverage: Onyx against llguidance, xgrammar and outlines-core on JSONSchemaBench,
and Onyx on the JSON Schema Test Suite (draft 2020-12).

1. Coverage. Every schema of every set (`bench.corpus.JSONSCHEMABENCH_DIR`, one gzipped JSONL
   file per set) is compiled by each engine on SmolLM2's vocabulary, in a worker process with a
   per-schema timeout (`--timeout`; a timeout counts as not compiled and the worker is started
   again). "Compiled" = the library returned a grammar. Onyx's refusals are counted by typed
   error class (and keyword, for an unsupported one).
2. Validity. For every schema Onyx compiles, `--walks` random walks through the grammar
   (`bench/schema_walks.py`: uniform over the allowed tokens, kept within `--budget` tokens by
   the budget-aware mask), each text parsed strictly and validated with Python `jsonschema`,
   format checking on. "Covered" = compiled and every walk valid: the benchmark's own definition
   of coverage. llguidance's grammars get the same walks through its own masks (past the budget
   the walk closes greedily; a walk that does not finish is counted as unfinished, not judged,
   and left out of "covered" as long as another walk of the schema was judged valid).
   Every output that does not validate is a compiler bug (target: 0 invalid).
3. The JSON Schema Test Suite, draft 2020-12 with `optional/` (`bench/schema_suite.py`): passes,
   false positives (an instance the suite calls invalid that Onyx's grammar accepts; target 0,
   all listed in the JSON), refused schemas by error, per file.
4. Compile time p50/p99/max per set and engine; Onyx's DFA states and memory (`memory_bytes`
   after `build_all`) p50/p99/max.

A full run is long on 2 cores (Onyx and llguidance with walks ~1 h each, xgrammar and
outlines-core longer): every schema's result is appended to `OUT/schema_bench.partial/ENGINE.jsonl`
as it comes, and `--resume` carries on from there (when the build and settings are the same).

    python bench/schema_bench.py                                  # everything (hours)
    python bench/schema_bench.py --engines onyx,llguidance --resume
    python bench/schema_bench.py --quick                          # a few schemas per set
    python bench/schema_bench.py --sets Github_easy --limit 50 --engines onyx --no-suite --out /tmp/sb

Results: tables on stdout, `schema_bench.json` and `schema_bench.png` in `--out` (default
bench/results; `--quick` without `--out` writes to a temporary folder).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import json  # noqa: E402
from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402

from bench import peers, schema_suite  # noqa: E402
from bench.corpus import JSONSCHEMABENCH_DIR, JSONSCHEMABENCH_SETS as SETS  # noqa: E402
from bench.peers import ENGINES  # noqa: E402
from bench.schema_walks import SchemaWorker, load_set  # noqa: E402

VOCAB = "smollm2"
TARGET_COVERAGE = 0.93
KEEP_FAILURES = 20

# --------------------------------------------------------------------------------------------
# Results kept as they come (resumable)
# --------------------------------------------------------------------------------------------


def build_id() -> str:
    """What identifies the Onyx build: the compiled extension's size and modification time."""
    import onyx._grammar as g

    st = Path(g.__file__).stat()
    return f"{Path(g.__file__).name}:{st.st_size}:{int(st.st_mtime)}"


class Checkpoint:
    """One JSONL file per engine: a header (engine, versions, settings), then one record per
    schema. Records are kept only when the header matches this run's."""

    def __init__(self, folder: Path, settings: dict, resume: bool):
        self.folder, self.settings, self.resume = Path(folder), settings, resume
        self.folder.mkdir(parents=True, exist_ok=True)

    def header(self, engine: str) -> dict:
        pkg = {"onyx": "onyx"}.get(engine, engine)
        return {"engine": engine, "version": harness.package_version(pkg),
                "onyx_build": build_id(), **self.settings}

    def open(self, engine: str) -> dict:
        """{key: record} already done for `engine` (empty unless resuming a matching run)."""
        path = self.folder / f"{engine}.jsonl"
        head = self.header(engine)
        done = {}
        if self.resume and path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            if lines and json.loads(lines[0]) == head:
                for line in lines[1:]:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:  # a line cut short by an interrupted run
                        continue
                    done[key_of(rec)] = rec
            else:
                print(f"{path}: another build or other settings; starting {engine} afresh", file=sys.stderr)
        if not done:
            path.write_text(json.dumps(head) + "\n", encoding="utf-8")
        return done

    def append(self, engine: str, rec: dict) -> None:
        with open(self.folder / f"{engine}.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def key_of(rec: dict) -> tuple:
    return rec["set"], rec["i"], rec["file"]


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def run_engine(engine: str, cases: list, args, ckpt: Checkpoint, walks: bool, t_start: float) -> tuple[list, dict]:
    """Every case for one engine (done ones taken from the checkpoint); the records and the
    worker's restarts by cause."""
    done = ckpt.open(engine)
    records, last_note = [], 0.0
    sw = SchemaWorker(engine, VOCAB, max_rss_mb=args.max_worker_mb)
    for n, (set_name, i, file, schema) in enumerate(cases, 1):
        key = (set_name, i, file)
        if key in done:
            records.append(done[key])
            continue
        rec = {"set": set_name, "i": i, "file": file, **sw.compile(schema, args.timeout)}
        if rec["ok"] and walks:
            rec["walks"] = sw.walk(schema, args.walks, args.budget, args.seed + i, args.walk_timeout)
        sw.finish()
        ckpt.append(engine, rec)
        records.append(rec)
        now = time.perf_counter()
        if now - last_note > 15 or n == len(cases):
            last_note = now
            ok = sum(r["ok"] for r in records)
            print(f"[{now - t_start:7.0f}s] {engine:13} {n:5}/{len(cases)} ({set_name}) compiled {ok}/{len(records)}",
                  file=sys.stderr, flush=True)
    sw.close()
    return records, dict(sw.restarts)


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def dist(xs) -> dict | None:
    """p50/p99/max (and n) of the numbers in xs, or None when there are none."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    a = np.asarray(xs, dtype=np.float64)
    return {"n": len(xs), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def covered(rec: dict) -> bool:
    """Compiled, and every walk wrote a valid text: walks that did not finish (only a peer's
    can: `matcher_walk` has no budget-aware mask) are left out, but one at least was judged."""
    w = rec.get("walks")
    return bool(rec["ok"] and w and w["valid"] > 0 and w["valid"] + w["unfinished"] == w["walks"])


def summarize(records: list[dict], walked: bool) -> dict:
    """Counts, error classes, time/size distributions and walk outcomes of a list of records."""
    n = len(records)
    ok = [r for r in records if r["ok"]]
    s = {"schemas": n, "compiled": len(ok), "compiled_pct": 100.0 * len(ok) / n if n else None,
         "timeouts": sum(r.get("error_class") == "Timeout" for r in records),
         "errors": dict(Counter(r["error_class"] for r in records if not r["ok"]).most_common()),
         "compile_ms": dist(r.get("compile_ms") for r in ok),
         "first_mask_ms": dist(r.get("first_mask_ms") for r in ok),
         "first_mask_errors": sum("first_mask_error" in r for r in ok)}
    if any("states" in r for r in ok):
        s["states"] = dist(r.get("states") for r in ok)
    if any("restriction" in r for r in ok):
        # Onyx: compiled under a sound restriction (the exact automaton did not fit).
        s["restricted"] = sum(r.get("restriction") is not None for r in ok)
    if walked:
        ws = [r["walks"] for r in ok if "walks" in r]
        s["memory_bytes"] = dist(w.get("memory_bytes") for w in ws)
        s["build_ms"] = dist(w.get("build_ms") for w in ws)
        outs = {k: sum(w.get(k, 0) for w in ws) for k in ("walks", "valid", "invalid", "unjudged", "unfinished",
                                                          "walk_errors", "invalid_other_drafts")}
        s["outputs"] = outs
        s["schemas_with_invalid_output"] = sum(w.get("invalid", 0) > 0 for w in ws)
        s["covered"] = sum(covered(r) for r in records)
        s["covered_pct"] = 100.0 * s["covered"] / n if n else None
    return s


def failures(records: list[dict], field: str, keep: int = KEEP_FAILURES) -> list[dict]:
    out = []
    for r in records:
        for f in (r.get("walks") or {}).get(field, []):
            if len(out) < keep:
                out.append({"set": r["set"], "file": r["file"], **f})
    return out


def report(by_engine: dict[str, list[dict]], walked: set[str], sets: list[str]) -> dict:
    out = {}
    for engine, records in by_engine.items():
        w = engine in walked
        out[engine] = {"all": summarize(records, w),
                       "sets": {s: summarize([r for r in records if r["set"] == s], w) for s in sets}}
        if w:
            out[engine]["invalid_outputs"] = failures(records, "failures")
            out[engine]["other_draft_failures"] = failures(records, "other_draft_failures")
            broken = [r for r in records if r["ok"] and r.get("walks", {}).get("walk_errors")]
            out[engine]["walk_errors"] = [{"set": r["set"], "file": r["file"], "error": r["walks"].get("walk_error")}
                                          for r in broken[:KEEP_FAILURES]]
    return out


# --------------------------------------------------------------------------------------------
# Tables and plot
# --------------------------------------------------------------------------------------------


def fmt(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def print_table(cols: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths)))  # noqa: E731
    print(line(cols))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def print_report(rep: dict, sets: list[str], walked: set[str], suite: dict | None) -> None:
    engines = list(rep)
    names = sets + ["all"]
    get = lambda e, s: rep[e]["all"] if s == "all" else rep[e]["sets"][s]  # noqa: E731
    cols = ["set", "schemas"]
    for e in engines:
        cols += [f"{e} %"] + ([f"{e} covered %", f"{e} invalid"] if e in walked else [])
    rows = []
    for s in names:
        row = [s, str(get(engines[0], s)["schemas"])]
        for e in engines:
            x = get(e, s)
            row.append(fmt(x["compiled_pct"]))
            if e in walked:
                row += [fmt(x.get("covered_pct")), str(x["outputs"]["invalid"])]
        rows.append(row)
    print("\nJSONSchemaBench coverage (compiled %; covered = compiled and every walk's text validates)\n")
    print_table(cols, rows)
    for e in engines:
        if e in walked:
            o = rep[e]["all"]["outputs"]
            print(f"\n{e} walks: {o['walks']} ({o['valid']} valid, {o['invalid']} invalid, {o['unjudged']} unjudged, "
                  f"{o['unfinished']} unfinished, {o['walk_errors']} failed); texts valid under the chosen draft but "
                  f"not under another draft the schema fits: {o['invalid_other_drafts']}")
    if "onyx" in rep and "restricted" in rep["onyx"]["all"]:
        print("\nOnyx schemas compiled under a sound restriction (exact automaton too large): "
              + ", ".join(f"{s} {get('onyx', s).get('restricted', 0)}" for s in names))
    if "onyx" in rep:
        print("\nOnyx refusals, most common error classes")
        for s in names:
            errs = get("onyx", s)["errors"]
            top = ", ".join(f"{k} {v}" for k, v in list(errs.items())[: (12 if s == "all" else 4)])
            print(f"  {s:16} {top}")
    cols = ["set"] + [f"{e} p50/p99/max ms" for e in engines]
    rows = []
    for s in names:
        row = [s]
        for e in engines:
            d = get(e, s)["compile_ms"]
            row.append("-" if not d else f"{d['p50']:.1f}/{d['p99']:.0f}/{d['max']:.0f}")
        rows.append(row)
    print("\nCompile time (compiled schemas only)\n")
    print_table(cols, rows)
    if "onyx" in rep:
        print("\nOnyx grammars: DFA states and memory after build_all, p50/p99/max\n")
        rows = []
        for s in names:
            x = get("onyx", s)
            st, mem = x.get("states"), x.get("memory_bytes")
            rows.append([s, "-" if not st else f"{st['p50']:.0f}/{st['p99']:.0f}/{st['max']:.0f}",
                         "-" if not mem else f"{mem['p50'] / 1e6:.1f}/{mem['p99'] / 1e6:.0f}/{mem['max'] / 1e6:.0f}"])
        print_table(["set", "states", "memory MB"], rows)
    if suite:
        t = suite["total"]
        print(f"\nJSON Schema Test Suite, draft 2020-12 with optional/: {t['passed']}/{t['tests']} passed, "
              f"{t['false_positives']} false positives, {t['false_negatives']} false negatives, "
              f"{t['refused']} tests with a refused schema")
        rows = [[n, str(r["tests"]), str(r["passed"]), str(r["false_positives"]), str(r["refused"])]
                for n, r in suite["files"].items()]
        print_table(["file", "tests", "passed", "false pos", "refused"], rows)
        print("  refusals by error: " + ", ".join(f"{k} {v}" for k, v in suite["refused_by_error"].items()))
        for fp in suite["false_positives"][:10]:
            print(f"  FALSE POSITIVE {fp['file']}: {fp['group']} / {fp['test']}: {fp['text'][:80]}")


def plot(rep: dict, sets: list[str], walked: set[str], path: Path):
    plt = harness.pyplot()
    if plt is None:
        return None
    engines = list(rep)
    colors = {"onyx": "#1b9e77", "outlines-core": "#d95f02", "xgrammar": "#7570b3", "llguidance": "#e7298a"}
    names = sets + ["all"]
    fig, axes = plt.subplots(2, 1, figsize=(14, 9))
    bw = 0.8 / max(1, len(engines))
    for ei, e in enumerate(engines):
        xs = [k + (ei - (len(engines) - 1) / 2) * bw for k in range(len(names))]
        summ = [rep[e]["all"] if s == "all" else rep[e]["sets"][s] for s in names]
        axes[0].bar(xs, [x["compiled_pct"] or 0 for x in summ], width=bw, color=colors.get(e), alpha=0.45,
                    label=f"{e} compiled")
        if e in walked:
            axes[0].bar(xs, [x.get("covered_pct") or 0 for x in summ], width=bw, color=colors.get(e),
                        label=f"{e} covered (walks valid)")
        p50 = [(x["compile_ms"] or {}).get("p50") for x in summ]
        axes[1].bar([x for x, v in zip(xs, p50) if v], [v for v in p50 if v], width=bw, color=colors.get(e), label=e)
    axes[0].axhline(100 * TARGET_COVERAGE, color="k", ls="--", lw=0.8)
    axes[0].set_ylabel("% of schemas")
    axes[0].set_title(f"JSONSchemaBench coverage ({VOCAB} vocabulary); dashed: Onyx target "
                      f"{100 * TARGET_COVERAGE:.0f}%")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("ms")
    axes[1].set_title("compile time p50 (compiled schemas)")
    for ax in axes:
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    return harness.save_figure(fig, path)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "5 schemas per set, 2 walks each, 4 test-suite files; writes to a temporary "
                                     "folder unless --out is given")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)}")
    ap.add_argument("--walk-engines", default="onyx,llguidance", help="engines whose grammars are walked and judged")
    ap.add_argument("--sets", default=None, help=f"comma-separated subset of {','.join(SETS)}")
    ap.add_argument("--limit", type=int, default=None, help="only the first N schemas of each set")
    ap.add_argument("--data", type=Path, default=JSONSCHEMABENCH_DIR, help="JSONSchemaBench folder")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to compile one schema")
    ap.add_argument("--walk-timeout", type=float, default=120.0, help="seconds for one schema's walks")
    ap.add_argument("--walks", type=int, default=3, help="random walks per compiled schema")
    ap.add_argument("--budget", type=int, default=96, help="tokens a walk may take")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-worker-mb", type=float, default=4000.0,
                    help="start a worker afresh once its resident memory passes this after a schema")
    ap.add_argument("--resume", action="store_true", help="carry on from OUT/schema_bench.partial")
    ap.add_argument("--no-suite", action="store_true", help="skip the JSON Schema Test Suite")
    ap.add_argument("--suite-files", type=int, default=None, help="only the first N test-suite files")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)

    engines = args.engines.split(",")
    sets = args.sets.split(",") if args.sets else list(SETS)
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; known: {', '.join(ENGINES)}")
    for s in sets:
        if s not in SETS:
            ap.error(f"unknown set {s!r}; known: {', '.join(SETS)}")
    if not args.data.is_dir():
        ap.error(f"{args.data} does not exist: JSONSchemaBench is kept outside the repository "
                 "(set ONYX_JSONSCHEMABENCH)")
    if args.quick:
        args.limit = args.limit or 5
        args.walks = min(args.walks, 2)
        args.suite_files = args.suite_files or 4
        if args.out == harness.RESULTS:
            args.out = Path(tempfile.gettempdir()) / "onyx_schema_bench_quick"
    walked = {e for e in args.walk_engines.split(",") if e in engines}
    out_dir = harness.out_dir(args.out)

    t_start = time.perf_counter()
    load_before = harness.loadavg()
    cases = [(s, i, f, schema) for s in sets for i, (f, schema) in enumerate(load_set(s, args.data, args.limit))]
    print(f"{len(cases)} schemas from {len(sets)} sets; engines {', '.join(engines)}; out {out_dir}", file=sys.stderr)
    settings = {"vocab": VOCAB, "timeout": args.timeout, "walks": args.walks, "budget": args.budget, "seed": args.seed}
    ckpt = Checkpoint(out_dir / "schema_bench.partial", settings, args.resume)
    by_engine, seconds, restarts = {}, {}, {}
    for e in engines:
        t0 = time.perf_counter()
        by_engine[e], restarts[e] = run_engine(e, cases, args, ckpt, e in walked, t_start)
        seconds[e] = time.perf_counter() - t0
    rep = report(by_engine, walked, sets)

    suite = None
    if not args.no_suite:
        t0 = time.perf_counter()
        root = schema_suite.suite_dir()
        factory = lambda: harness.Worker(peers.open_adapter, ("onyx", VOCAB), timeout=600)  # noqa: E731
        suite = schema_suite.run_suite(factory, root, args.timeout, args.suite_files,
                                       log=lambda m: print(m, file=sys.stderr, flush=True))
        seconds["suite"] = time.perf_counter() - t0

    print_report(rep, sets, walked, suite)
    result = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": harness.machine_meta(),
            "versions": {**peers.versions(), "jsonschema": harness.package_version("jsonschema")},
            "onyx_build": build_id(),
            "args": vars(args),
            "data": str(args.data),
            "vocab": VOCAB,
            "loadavg_before_after": [load_before, harness.loadavg()],
            "seconds": seconds,
            "worker_restarts": restarts,
            "total_s": time.perf_counter() - t_start,
            "notes": [
                "compiled = the library returned a grammar within --timeout seconds (a worker process per "
                "engine, started again after a timeout); compile_ms = the compile call, first_mask_ms = compile "
                "+ the first mask",
                "JSON settings (bench/peers.py): compact output for every engine; llguidance "
                "whitespace_flexible false with ',' and ':'; xgrammar any_whitespace false, strict_mode true; "
                "outlines-core whitespace_pattern ''",
                "walks (bench/schema_walks.py): uniform over the allowed tokens, EOS aside; Onyx within the "
                "budget through token_bitmask_within; llguidance through its masks, closing greedily past the "
                "budget, unfinished after 400 tokens",
                "judge: the $schema draft, else the newest draft whose metaschema accepts the schema; that "
                "draft's own format checker; strict JSON (no duplicate keys, NaN or Infinity). "
                "invalid_other_drafts: valid under the chosen draft, invalid under another draft whose "
                "metaschema accepts a schema without $schema (the compiler aims at every reading)",
                "covered = compiled and every walk validated (unfinished walks, llguidance's only, left out; "
                "at least one judged valid)",
                "Onyx memory_bytes after build_all (DFA + every state's token row)",
            ],
        },
        "coverage": rep,
        "suite": suite,
    }
    harness.save_results(out_dir, "schema_bench", result,
                         None if args.no_plot else lambda res, path: plot(rep, sets, walked, path))
    print(f"total {time.perf_counter() - t_start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
