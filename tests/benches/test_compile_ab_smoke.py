"""Smoke test of bench/compile_ab.py: the installed extension as both builds, on a small corpus
written here in JSONSchemaBench's layout; both builds must agree on every outcome."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from onyx import _grammar

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "compile_ab.py"

pytestmark = pytest.mark.slow

CASES = [
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "string", "maxLength": 300},  # counted in chunk rules: a pushdown
    {"type": "integer", "minimum": 2, "maximum": 1},  # refused: no integer is both
]


def test_one_build_against_itself_agrees_on_every_schema(tmp_path):
    data = tmp_path / "jsb"
    data.mkdir()
    for name in ("SetA", "SetB"):
        with gzip.open(data / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            for k, schema in enumerate(CASES):
                f.write(json.dumps({"file": f"{k}.json", "schema": schema}) + "\n")
    so = Path(_grammar.__file__)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(BENCH), str(so), str(so), "--sets", "SetA,SetB", "--step", "1",
                           "--walk", "8", "--data", str(data), "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((out / "compile_ab.json").read_text())
    total = result["summary"]["all"]
    assert total["schemas"] == 2 * len(CASES) and total["differ"] == 0
    assert total["walked"] == 4 and total["walks_differ"] == 0
    assert total["a_pushdown"] == total["b_pushdown"] == 2
    assert 0 < total["geo_ratio_b_over_a"] < 10
    outcomes = [row["a"][0] for row in result["schemas"]["SetA"]]
    assert outcomes == ["ok", "ok", "error"]
    assert "SetB" in proc.stdout and "all" in proc.stdout
