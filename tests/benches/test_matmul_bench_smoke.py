"""Smoke test of bench/matmul_bench.py: `--quick` runs, every variant's products are right, and
the JSON has a row per (shape, k) with positive bandwidths and the references filled in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from onyx.cpu import blas

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "matmul_bench.py"

pytestmark = pytest.mark.skipif(not (sys.platform.startswith("linux") and blas._state["shim"]),
                                reason="the bench measures the Linux BLAS shim (OpenBLAS and a C compiler)")


def test_quick_bench_rows_are_right_and_complete(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = json.loads((tmp_path / "matmul_bench.json").read_text())
    rows = data["rows"]
    assert {(r["shape"], r["k"]) for r in rows} == {(s, k) for s in ("q/o", "down") for k in (1, 4, 16)}
    variants = [v for v in ("now", "before", "openblas") if f"{v}_gbs" in rows[0]]
    assert variants[0] == "now" and "openblas" in variants
    for r in rows:
        for v in variants:
            assert r[f"{v}_gbs"] > 0 and r[f"{v}_us"] > 0, (r["shape"], r["k"], v)
            assert r[f"{v}_max_rel_err"] < 1e-5, (r["shape"], r["k"], v)
        assert r["now_over_openblas"] > 0 and r["fma_ceiling_gbs"] > 0
        if r["k"] == 1:
            assert r["now_over_now_k1"] == 1.0
        if blas.shim_threads() > 1:  # the split variant: right, and timed by wall clock
            assert r["split_max_rel_err"] < 1e-5 and r["split_gbs"] == r["split_gbs_wall"] > 0
            assert r["split_over_now_wall"] > 0
    assert data["meta"]["fma_peak_glanes_per_s"] > 0
    assert "| shape (N x K) |" in proc.stdout
