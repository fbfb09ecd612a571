"""Structured-output backends inside vLLM, in one run: Onyx's (`onyx.integrations.vllm`) beside
vLLM's own xgrammar and guidance (llguidance), on vLLM's CPU build with the default model
converted to float32.

Each backend gets a fresh process (`bench/vllm_worker.py`, run with the vLLM environment's
Python: `make vllm-env` builds it) and the same work, warmed up first; the backends take turns,
`--passes` times (the schema sample only in the first), and tokens/s are compared pass by pass
(this machine is shared: a pass's backends ran minutes apart, not at once):

- greedy JSON requests (three schemas of `bench/corpus.py`, each with its prompt) one at a time
  and eight at a time: tokens/s, and every output checked with jsonschema (cut ones counted).
  Backends differ in the whitespace they allow, so their greedy outputs differ in length, and a
  request's prompt is a larger share of a short one's time: the table gives tokens a request;
- the median request's time per token after its first (vLLM's own timestamps): what a step
  costs, which output lengths and prompts do not skew;
- the time vLLM spends filling the batch's grammar bitmask each step (`grammar_bitmask`);
- a sample of JSONSchemaBench schemas (the same ones for every backend: `--per-set` a set,
  chosen by a hash of the file name) through vLLM's request validation and the backend's
  compile, each timed cold: how many each backend accepts, and how long a compile takes.

    python bench/vllm_bench.py                 # 10 schemas a set, 3 rounds, 2 passes
    python bench/vllm_bench.py --quick         # 3 a set, 1 round, 1 pass

Prints one table and writes vllm_bench.json to --out (default bench/results).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402, I001
from bench.corpus import CHARACTER_SCHEMA, JSONSCHEMABENCH_SETS, ORDER_SCHEMA_FREE, PERSON_SCHEMA_FREE  # noqa: E402
from bench.schema_walks import load_set, sample_by_hash  # noqa: E402

BACKENDS = ["onyx", "xgrammar", "guidance"]
GENERATE = [
    ("Describe a person as JSON with name, age and email: ", PERSON_SCHEMA_FREE),
    ("An order as JSON: an id like ABC-1234, the customer and up to three items: ", ORDER_SCHEMA_FREE),
    ("A fantasy character as JSON: name, age, a short backstory, skills and possessions: ", CHARACTER_SCHEMA),
]


def cases(per_set: int) -> dict:
    coverage = []
    for name in JSONSCHEMABENCH_SETS:
        for file, schema in sample_by_hash(load_set(name), per_set, salt="vllm"):
            coverage.append({"set": name, "file": file, "schema": json.loads(schema) if isinstance(schema, str) else schema})
    return {"coverage": coverage, "generate": [{"prompt": p, "schema": s} for p, s in GENERATE]}


def run(backend: str, python: Path, case_file: Path, rounds: int, timeout_s: float) -> dict:
    """One worker's results (see `bench/vllm_worker.py`)."""
    cmd = [str(python), str(harness.ROOT / "bench" / "vllm_worker.py"), "--backend", backend,
           "--cases", str(case_file), "--rounds", str(rounds)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tempfile.gettempdir())
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{backend}: the worker failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def table(results: dict) -> list[str]:
    head = ["backend", "accepted", "compile p50 / p90 / max ms", "mask fill p50 / p99 µs", "tok/s, 1", "tok/s, 8",
            "ms/token, 1", "ms/token, 8", "tokens a request", "invalid", "cut"]
    rows = []
    for name, r in results.items():
        c, m = r["compile_ms"] or {}, r["mask_fill_us"] or {}
        runs = {x["batch"]: x for x in r["runs"]}
        rows.append([name, f"{r['accepted']} / {r['schemas']}",
                     " / ".join(f"{c.get(k, float('nan')):.1f}" for k in ("p50", "p90", "max")),
                     f"{m.get('p50', float('nan')):.0f} / {m.get('p99', float('nan')):.0f}",
                     f"{runs[1]['tokens_per_s']:.1f}", f"{runs[8]['tokens_per_s']:.1f}",
                     f"{runs[1]['decode_ms_per_token']:.1f}", f"{runs[8]['decode_ms_per_token']:.1f}",
                     f"{(runs[1]['tokens_per_request'] + runs[8]['tokens_per_request']) / 2:.0f}",
                     str(sum(x["invalid"] for x in r["runs"])), str(sum(x["cut"] for x in r["runs"]))])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def main() -> int:
    ap = harness.arg_parser(__doc__, "3 schemas a set, 1 round")
    ap.add_argument("--per-set", type=int, default=None, help="JSONSchemaBench schemas per set (default 10)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of each batch size (default 3)")
    ap.add_argument("--passes", type=int, default=None, help="turns of every backend (default 2)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--vllm-python", type=Path, default=harness.ROOT / ".venv-vllm" / "bin" / "python")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per backend")
    args = ap.parse_args()
    if not args.vllm_python.is_file():
        raise SystemExit(f"{args.vllm_python} is missing: `make vllm-env` builds vLLM's environment")
    per_set = args.per_set or (3 if args.quick else 10)
    rounds = args.rounds or (1 if args.quick else 3)
    passes = args.passes or (1 if args.quick else 2)
    work = cases(per_set)
    files = []
    for sample in (work, {**work, "coverage": []}):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(sample, f)
        files.append(Path(f.name))
    results: dict = {}
    for p in range(passes):
        for backend in args.backends.split(","):
            print(f"pass {p + 1}: {backend} ...", flush=True)
            r = run(backend, args.vllm_python, files[min(p, 1)], rounds, args.timeout)
            if p == 0:
                results[backend] = {**r, "passes": [r["runs"]]}
            else:
                results[backend]["passes"].append(r["runs"])
    for r in results.values():  # each batch size's figures: the median pass by tokens/s
        r["runs"] = [sorted((runs[i] for runs in r["passes"]), key=lambda x: x["tokens_per_s"])[len(r["passes"]) // 2]
                     for i in range(len(r["passes"][0]))]
    lines = table(results)
    print("\n" + "\n".join(lines))
    ratios = {}
    if "onyx" in results and "xgrammar" in results:
        def tps(name: str, p: int, b: int) -> float:
            return next(x["tokens_per_s"] for x in results[name]["passes"][p] if x["batch"] == b)

        def ms(name: str, p: int, b: int) -> float:
            return next(x["decode_ms_per_token"] for x in results[name]["passes"][p] if x["batch"] == b)

        for b in (1, 8):
            ratios[f"onyx_over_xgrammar_tokens_per_s_batch{b}"] = [tps("onyx", p, b) / tps("xgrammar", p, b)
                                                                  for p in range(passes)]
            ratios[f"onyx_over_xgrammar_decode_speed_batch{b}"] = [ms("xgrammar", p, b) / ms("onyx", p, b)
                                                                  for p in range(passes)]
        print("\nOnyx / xgrammar, pass by pass: "
              + "; ".join(f"{k.removeprefix('onyx_over_xgrammar_')}: " + ", ".join(f"{v:.2f}" for v in vs)
                          for k, vs in ratios.items()))
    versions = next(iter(results.values()))["versions"]
    meta = {**harness.machine_meta(), "per_set": per_set, "rounds": rounds, "passes": passes, "versions": versions}
    harness.save_results(harness.out_dir(args.out), "vllm_bench", {"meta": meta, "results": results, "ratios": ratios})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
