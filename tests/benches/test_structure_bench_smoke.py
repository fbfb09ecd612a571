"""Smoke test of bench/structure_bench.py: `--quick --vocabs smollm2` runs and writes a row of
positive numbers per structure, the special-token trigger compiled as one special token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_structure_bench(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "structure_bench.py"), "--quick", "--vocabs", "smollm2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["structure"]: r for r in json.loads((tmp_path / "structure_bench.json").read_text())["rows"]}
    assert set(rows) == {"free_text", "until_text", "until_token", "reasoning_json", "tools_required", "tools_auto"}
    for r in rows.values():
        assert r["states"] > 0 and r["compile_ms"] > 0 and r["step_us"] > 0 and r["walk_steps"] > 0
    assert rows["until_token"]["special_tokens"] == 1 and rows["until_text"]["special_tokens"] == 0
