"""Smoke test of bench/repair_bench.py: the comparison part runs (`--quick --parts compare`),
writes its JSON with a row per method and corpus, and its numbers agree with the outputs it
recorded. json_repair's rows are there when it is installed (the bench extra)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from bench import repair_corpus

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "repair_bench.py"


def test_quick_compare_runs_and_adds_up(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--parts", "compare", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = json.loads((tmp_path / "repair_bench.json").read_text())["compare"]
    methods = {"onyx (default)", "oracle: onyx, per-case edit costs"}
    if importlib.util.find_spec("json_repair") is not None:
        methods |= {"json_repair (no schema)", "json_repair schema= standard", "json_repair schema= salvage",
                    "json_repair -> onyx", "json_repair salvage -> onyx"}
    for corpus_name in ("train", "test"):
        _, cases = repair_corpus.load(corpus_name)
        part = data[corpus_name]
        summary = {s["method"]: s for s in part["summary"]}
        assert set(summary) == methods
        for s in part["summary"]:
            assert s["cases"] == len(cases)
            assert 0 <= s["intended_pct"] <= s["schema_valid_pct"] <= s["valid_json_pct"] <= 100
            assert s["time_median_s"] > 0
        # The default row's figures are those of the outputs it recorded.
        rows = [r for r in part["cases"] if r["method"] == "onyx (default)"]
        assert len(rows) == len(cases)
        intended = {c.name: c.intended for c in cases}
        hits = sum(json.loads(r["output"]) == intended[r["case"]] for r in rows)
        assert hits == summary["onyx (default)"]["intended"]
        assert summary["onyx (default)"]["valid_json_pct"] == 100.0
        assert summary["onyx (default)"]["raised"] == 0
    assert "broken-JSON test corpus" in proc.stdout and "onyx (default)" in proc.stdout
