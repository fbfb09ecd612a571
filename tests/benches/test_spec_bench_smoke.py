"""Smoke test of bench/spec_bench.py: `--quick --no-draft-model` runs, writes its JSON with
baseline and aware rows at positive tok/s, and every greedy row gives baseline's token ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs a whole bench in quick mode

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "spec_bench.py"


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("spec_bench")
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--no-draft-model", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads((out / "spec_bench.json").read_text()), out


def test_quick_bench_has_baseline_and_aware_rows_with_positive_speed(bench_run):
    proc, data, _out = bench_run
    rows = data["rows"]
    assert rows and {r["block"] for r in rows} == {"model-free"}
    patterns = {p["key"] for p in data["patterns"]}
    assert patterns
    for p in patterns:
        mine = {r["row"]: r for r in rows if r["pattern"] == p}
        assert "baseline" in mine and mine["baseline"]["tok_s"] > 0
        assert mine["baseline"]["drafted"] == 0 and mine["baseline"]["speedup"] == pytest.approx(1.0)
        aware = [r for r in mine.values() if r["mode"] == "aware"]
        assert aware and all(r["tok_s"] > 0 and r["speedup"] > 0 for r in aware)
        assert any(r["row"] == "aware+jf g=auto" for r in aware)
        for r in mine.values():
            assert r["completion_tokens"] > 0 and r["target_forwards"] > 0
            assert 0.0 <= r["acceptance_rate"] <= 1.0
    assert "Targets" in proc.stdout and "speedup" in proc.stdout


def test_quick_bench_greedy_rows_equal_baseline(bench_run):
    _proc, data, _out = bench_run
    differing = [f"{r['pattern']} {r['row']}" for r in data["rows"] if not r["same_as_baseline"]]
    assert not differing, f"greedy rows whose tokens differ from baseline's: {differing}"
    for p, v in data["targets"]["greedy_rows_equal_baseline"].items():
        assert v["pass"], p
