"""Smoke test of bench/memory_bench.py on a small corpus written here in JSONSchemaBench's
layout: it picks the largest schemas, measures each in its own worker and writes a JSON whose
peaks and statuses add up."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.corpus import JSONSCHEMABENCH_SETS

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "memory_bench.py"

pytestmark = pytest.mark.slow

SMALL = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
LARGE = {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 8} for i in range(40)},
         "required": ["p0"]}
EMPTY = {"type": "integer", "minimum": 2, "maximum": 1}  # refused: no integer is both


def test_the_largest_schemas_are_measured(tmp_path):
    data_dir = tmp_path / "jsb"
    data_dir.mkdir()
    for k, name in enumerate(JSONSCHEMABENCH_SETS):
        cases = [("small.json", SMALL)] + ([("large.json", LARGE), ("empty.json", {**EMPTY, "description": "x" * 2000})]
                                           if k == 0 else [])
        with gzip.open(data_dir / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            for file, schema in cases:
                f.write(json.dumps({"file": file, "schema": schema}) + "\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(BENCH), "--n", "2", "--data", str(data_dir), "--out", str(out), "--eager"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((out / "memory_bench.json").read_text())
    rows = data["results"]["text"]["onyx"]["schemas"]
    assert [r["file"] for r in rows] == ["empty.json", "large.json"]  # the two largest, largest first
    empty, large = rows
    assert empty["status"] == "refused" and "EmptyLanguage" in empty["error"]
    assert large["status"] == "ok" and large["invalid"] == 0 and large["valid"] == 1
    assert 0 < large["setup_mb"] <= large["compile_mb"] <= large["walk_mb"]
    summary = data["results"]["text"]["onyx"]["summary"]
    assert summary["status"] == {"refused": 1, "ok": 1} and summary["peak_mb"]["max"] == large["walk_mb"]
    assert "large.json" in proc.stdout

    # Again as a request walks (only the rows it visits), ranked by the eager run's index sizes
    # and kept beside it.
    again = tmp_path / "again"
    first = out / "memory_bench.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--n", "1", "--data", str(data_dir), "--out", str(again),
                           "--index-from", str(first), "--before", str(first)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lazy = json.loads((again / "memory_bench.json").read_text())
    assert lazy["meta"]["eager"] is False and lazy["before"]["meta"]["eager"] is True
    [top] = lazy["results"]["index"]["onyx"]["schemas"]
    assert top["file"] == "large.json" and top["status"] == "ok" and top["invalid"] == 0
    assert 0 < top["index_bytes"] < large["index_bytes"]
