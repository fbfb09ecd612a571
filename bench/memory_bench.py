"""Peak memory of large grammars: the largest JSONSchemaBench schemas, each compiled and walked.

The `--n` largest schemas of all sets are compiled by each engine on SmolLM2's vocabulary:
largest by the length of their JSON text, and (with `--index-from`, a schema bench's
`schema_bench.partial/onyx.jsonl`) by the size of the token index Onyx built for them, then walked (`--walks` random walks, as `bench/schema_bench.py`
walks: for Onyx only the rows the walks visit, with the distances budget-aware masks need,
as a request builds them; `--eager` builds the whole token index first). Every
schema gets a fresh worker process, so each peak is that schema's own: the worker's peak
resident memory (`VmHWM`) after setup, after compiling, and after the walks. A worker's
address space is limited to `--max-worker-mb`, so a grammar that would exhaust the machine
fails alone (counted as out of memory) instead of taking the machine down.

    python bench/memory_bench.py                  # the 50 largest schemas, Onyx
    python bench/memory_bench.py --index-from /tmp/sb/schema_bench.partial/onyx.jsonl --n 20
    python bench/memory_bench.py --index-from OLD.json --before OLD.json   # OLD: an --eager run
    python bench/memory_bench.py --n 5 --out /tmp/mb

Prints one table, writes memory_bench.json to --out (default bench/results).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness, peers  # noqa: E402
from bench.corpus import JSONSCHEMABENCH_DIR, JSONSCHEMABENCH_SETS  # noqa: E402
from bench.schema_walks import compile_call, load_set, walk_call  # noqa: E402

VOCAB = "smollm2"


def largest(n: int, data_dir: Path, index_sizes: dict | None = None) -> list[dict]:
    """The n largest schemas of all sets, largest first (by JSON text, or by `index_sizes`, the
    token index bytes by (set, file)): set, file, size and the schema."""
    cases = []
    for name in JSONSCHEMABENCH_SETS:
        for file, schema in load_set(name, data_dir):
            text = schema if isinstance(schema, str) else json.dumps(schema)
            cases.append({"set": name, "file": file, "bytes": len(text), "schema": json.loads(text)})
    if index_sizes is None:
        cases.sort(key=lambda c: -c["bytes"])
    else:
        cases.sort(key=lambda c: -index_sizes.get((c["set"], c["file"]), 0))
    return cases[:n]


def index_sizes(partial: Path) -> dict:
    """The token index bytes per (set, file) that a schema bench recorded (its partial
    `onyx.jsonl`), or that an eager run of this bench did (its `memory_bench.json`, or the
    eager run it keeps as `before`)."""
    if partial.suffix == ".json":
        data = json.loads(partial.read_text())
        data = data.get("before", data)
        rows = [r for ranking in data["results"].values() for r in ranking.get("onyx", {}).get("schemas", [])]
        return {(r["set"], r["file"]): r["index_bytes"] for r in rows if r.get("index_bytes")}
    sizes = {}
    for line in partial.read_text().splitlines()[1:]:
        r = json.loads(line)
        size = (r.get("walks") or {}).get("memory_bytes")
        if size:
            sizes[(r["set"], r["file"])] = size
    return sizes


def limited_adapter(engine: str, vocab: str, max_mb: int):
    """`peers.open_adapter` in a process whose address space is capped at `max_mb`."""
    cap = max_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return peers.open_adapter(engine, vocab)


def peak_call(_adapter, _payload) -> float | None:
    """The worker's peak resident memory so far, in MB (Linux's VmHWM; None elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def measure(engine: str, case: dict, args) -> dict:
    """One schema in a fresh worker: peaks after setup, compile and walks, and what failed."""
    out = {"set": case["set"], "file": case["file"], "bytes": case["bytes"]}
    w = harness.Worker(limited_adapter, (engine, VOCAB, args.max_worker_mb), args.timeout)
    if w.error:
        return {**out, "status": "setup failed", "error": w.error}
    try:
        out["setup_mb"], _ = w.run(peak_call, None, 60)
        compiled, err = w.run(compile_call, {"schema": case["schema"]}, args.timeout)
        if err or not compiled.get("ok"):
            error = err or compiled.get("error_class")
            out["status"] = "out of memory" if _oom(err) else "refused" if compiled else "failed"
            return {**out, "error": error}
        out.update(compile_ms=compiled["compile_ms"], states=compiled.get("states"), restriction=compiled.get("restriction"))
        out["compile_mb"], _ = w.run(peak_call, None, 60)
        walked, err = w.run(walk_call, {"schema": case["schema"], "walks": args.walks, "budget": args.budget, "seed": 0,
                                        "eager": args.eager}, args.timeout)
        if err:
            return {**out, "status": "out of memory" if _oom(err) else "walk failed", "error": err}
        out.update(valid=walked["valid"], invalid=walked["invalid"], index_bytes=walked.get("memory_bytes"),
                   build_error=walked.get("build_error"))
        out["walk_mb"], _ = w.run(peak_call, None, 60)
        out["status"] = "out of memory" if _oom(walked.get("build_error")) else "ok"
        return out
    finally:
        w.close()


def _oom(error: str | None) -> bool:
    return bool(error) and any(k in error for k in ("MemoryError", "memory allocation", "worker died"))


def summary(rows: list[dict]) -> dict:
    peaks = [r.get("walk_mb") or r.get("compile_mb") for r in rows if r.get("compile_mb")]
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    return {"schemas": len(rows), "status": by_status,
            "peak_mb": {"p50": statistics.median(peaks), "max": max(peaks)} if peaks else None,
            "invalid": sum(r.get("invalid") or 0 for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50, help="how many of the largest schemas")
    ap.add_argument("--engines", default="onyx")
    ap.add_argument("--walks", type=int, default=1)
    ap.add_argument("--budget", type=int, default=96, help="tokens per walk")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per call")
    ap.add_argument("--max-worker-mb", type=int, default=12000, help="address space of a worker")
    ap.add_argument("--data", type=Path, default=JSONSCHEMABENCH_DIR)
    ap.add_argument("--eager", action="store_true", help="Onyx: build the whole token index before the walks")
    ap.add_argument("--index-from", type=Path, help="a schema bench's partial onyx.jsonl: also rank by index size")
    ap.add_argument("--before", type=Path, help="an earlier memory_bench.json, kept beside this run")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = ap.parse_args()
    rankings = {"text": largest(args.n, args.data)}
    if args.index_from:
        rankings["index"] = largest(args.n, args.data, index_sizes(args.index_from))
    results = {}
    for (ranking, cases), engine in ((r, e) for r in rankings.items() for e in args.engines.split(",")):
        rows = []
        print(f"{engine}, largest by {ranking}: {len(cases)} schemas")
        print(f"{'set':16} {'file':28} {'KB':>6} {'setup MB':>9} {'compile MB':>11} {'walk MB':>8} {'index MB':>9}  status")
        for case in cases:
            r = measure(engine, case, args)
            rows.append(r)
            mb = lambda k: f"{r[k]:,.0f}" if r.get(k) is not None else "-"  # noqa: E731
            index = f"{r['index_bytes'] / 1e6:,.0f}" if r.get("index_bytes") else "-"
            print(f"{r['set']:16} {r['file'][:28]:28} {r['bytes'] / 1e3:6.0f} {mb('setup_mb'):>9} {mb('compile_mb'):>11} "
                  f"{mb('walk_mb'):>8} {index:>9}  {r['status']}", flush=True)
        results.setdefault(ranking, {})[engine] = {"summary": summary(rows), "schemas": rows}
        print(f"{engine}: {json.dumps(results[ranking][engine]['summary'])}")
    data = {"meta": {**harness.machine_meta(), "vocab": VOCAB, "n": args.n, "walks": args.walks, "budget": args.budget,
                     "eager": args.eager, "max_worker_mb": args.max_worker_mb, "engines": args.engines.split(",")},
            "results": results}
    if args.before:
        attach_before(data, args.before)
    print("wrote", harness.write_json(args.out / "memory_bench.json", data))


def attach_before(data: dict, before: Path) -> None:
    """Keeps an earlier run's meta and results in `data["before"]` (an earlier run's own
    `before` is dropped)."""
    old = json.loads(before.read_text())
    data["before"] = {"meta": old["meta"], "results": old["results"]}


if __name__ == "__main__":
    main()
