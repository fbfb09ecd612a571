"""Smoke test of bench/host_bench.py: `--quick --out DIR` runs end to end on the default model and
writes, for every load at 1 and 8 requests, counted decode steps with their engine and bare
times and the host work outside the forward. Sizes are not asserted (the machine may be
loaded); only that every number exists and is consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs a whole bench in quick mode

ROOT = Path(__file__).resolve().parents[2]


def test_every_load_and_width_is_measured(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "host_bench.py"), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "outside share" in proc.stdout
    data = json.loads((tmp_path / "host_bench.json").read_text())
    got = {(r["sequences"], r["load"]): r for r in data["results"]}
    assert set(got) == {(n, load) for n in (1, 8) for load in ("free", "regex", "json")}
    for (n, _), r in got.items():
        assert r["steps"] > 0
        assert 1 <= r["mean_rows"] <= n
        assert r["engine_step_ms"] > 0 and r["bare_step_ms"] > 0
        # the part outside the forward is part of the step
        assert 0 < r["outside_forward_ms"] < r["engine_step_ms"]
        assert r["outside_share"] == pytest.approx(r["outside_forward_ms"] / r["engine_step_ms"], abs=0.01)
    assert max(r["mean_rows"] for (n, _), r in got.items() if n == 8) > 1  # requests decoded together
