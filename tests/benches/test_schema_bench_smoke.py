"""Smoke test of bench/schema_bench.py: a small `--quick` run writes a JSON whose counts add up
(schemas, refusals, walks, test-suite outcomes), prints its tables, and `--resume` takes the
results already written instead of compiling again. Each installed peer library also runs a
tiny coverage pass. Needs the JSONSchemaBench data (kept outside the repository) and, once, the
network to fetch the JSON Schema Test Suite into ~/.cache/onyx."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.corpus import JSONSCHEMABENCH_DIR
from bench.peers import PEER_PACKAGES
from bench.schema_suite import suite_dir, suite_files

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "schema_bench.py"
SETS = ["Glaiveai2K", "Github_trivial"]
LIMIT = 3
SUITE_FILES = 2

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not JSONSCHEMABENCH_DIR.is_dir(),
                       reason=f"JSONSchemaBench is not at {JSONSCHEMABENCH_DIR} (kept outside the repository; "
                              "set ONYX_JSONSCHEMABENCH)"),
]


def run_bench(out: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--sets", ",".join(SETS), "--limit", str(LIMIT),
                           *args, "--out", str(out)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads((out / "schema_bench.json").read_text())


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("schema_bench")
    proc, data = run_bench(out, "--engines", "onyx", "--suite-files", str(SUITE_FILES))
    return proc, data, out


def test_coverage_counts_add_up(bench_run):
    _proc, data, _out = bench_run
    onyx = data["coverage"]["onyx"]
    assert set(data["coverage"]) == {"onyx"} and set(onyx["sets"]) == set(SETS)
    walks = data["meta"]["args"]["walks"]
    for s in SETS:
        x = onyx["sets"][s]
        assert x["schemas"] == LIMIT
        assert x["compiled"] + sum(x["errors"].values()) == LIMIT
        o = x["outputs"]
        assert o["walks"] == walks * x["compiled"]
        assert o["valid"] + o["invalid"] + o["unjudged"] + o["unfinished"] + o["walk_errors"] == o["walks"]
        assert 0 <= x["covered"] <= x["compiled"]
        if x["compiled"]:
            d = x["compile_ms"]
            assert d["n"] == x["compiled"] and 0 < d["p50"] <= d["p99"] <= d["max"]
            assert x["states"]["p50"] > 0 and x["memory_bytes"]["p50"] > 0
            assert 0 <= x["restricted"] <= x["compiled"]
    total = onyx["all"]
    assert total["schemas"] == LIMIT * len(SETS)
    assert total["compiled"] == sum(onyx["sets"][s]["compiled"] for s in SETS)
    assert total["restricted"] == sum(onyx["sets"][s].get("restricted", 0) for s in SETS)
    assert total["errors"] == {k: sum(onyx["sets"][s]["errors"].get(k, 0) for s in SETS) for k in total["errors"]}
    assert bool(onyx["invalid_outputs"]) == (total["outputs"]["invalid"] > 0)
    for f in onyx["invalid_outputs"]:
        assert f["set"] in SETS and f["file"].endswith(".json") and f["text"] and f["error"]


def test_suite_counts_add_up(bench_run):
    _proc, data, _out = bench_run
    suite = data["suite"]
    files = suite_files(suite_dir())[:SUITE_FILES]
    assert list(suite["files"]) == [name for name, _path in files]
    for name, path in files:
        row = suite["files"][name]
        groups = json.loads(path.read_text())
        assert row["groups"] == len(groups) and row["tests"] == sum(len(g["tests"]) for g in groups)
        assert row["passed"] + row["false_positives"] + row["false_negatives"] + row["refused"] == row["tests"]
    t = suite["total"]
    assert t["tests"] == sum(r["tests"] for r in suite["files"].values())
    assert len(suite["false_positives"]) == t["false_positives"]
    assert sum(suite["refused_by_error"].values()) == t["refused"]


def test_tables_and_plot(bench_run):
    proc, _data, out = bench_run
    assert "JSONSchemaBench coverage" in proc.stdout and "Compile time" in proc.stdout
    assert "JSON Schema Test Suite" in proc.stdout and "Onyx refusals" in proc.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "schema_bench.png").stat().st_size > 0


def test_resume_reads_the_checkpoint(bench_run):
    """A record edited in the checkpoint comes back in the resumed run's numbers: it was read,
    not compiled again."""
    _proc, data, out = bench_run
    path = out / "schema_bench.partial" / "onyx.jsonl"
    lines = path.read_text().splitlines()
    i = next(k for k, line in enumerate(lines[1:], 1) if json.loads(line)["ok"])
    rec = json.loads(lines[i])
    rec["compile_ms"] = 123456.0
    lines[i] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    _proc, again = run_bench(out, "--engines", "onyx", "--no-suite", "--resume")
    assert again["coverage"]["onyx"]["all"]["compile_ms"]["max"] == 123456.0
    assert again["coverage"]["onyx"]["all"]["compiled"] == data["coverage"]["onyx"]["all"]["compiled"]
    assert len(path.read_text().splitlines()) == len(lines)  # nothing appended


@pytest.mark.parametrize("peer", sorted(PEER_PACKAGES))
def test_installed_peer_compiles_in_the_bench(peer, tmp_path):
    if importlib.util.find_spec(PEER_PACKAGES[peer]) is None:
        pytest.skip(f"{PEER_PACKAGES[peer]} is not installed (the bench extra: make bench)")
    _proc, data = run_bench(tmp_path, "--engines", peer, "--no-suite", "--no-plot")
    x = data["coverage"][peer]["all"]
    assert x["schemas"] == LIMIT * len(SETS)
    assert x["compiled"] > 0, x["errors"]  # these small schemas compile in every library
    assert x["compiled"] + sum(x["errors"].values()) == x["schemas"]
    if peer == "llguidance":  # walked through its own masks
        assert x["outputs"]["walks"] == data["meta"]["args"]["walks"] * x["compiled"]
