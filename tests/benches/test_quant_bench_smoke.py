"""Smoke test of bench/quant_bench.py: `--quick --out DIR` runs end to end on the default model and
writes the bandwidth, both loads' bytes per token, floors and decode times, and the products by
row count. Sizes are not asserted (the machine may be loaded), only that they are consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs a whole bench in quick mode

ROOT = Path(__file__).resolve().parents[2]


def test_floor_decode_and_products_are_measured(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "quant_bench.py"), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "floor/decode" in proc.stdout
    data = json.loads((tmp_path / "quant_bench.json").read_text())
    assert data["float_stream_gbs"] > 0 and data["quant_stream_gbs"] > 0
    q, f = data["loads"]["quantized"], data["loads"]["float32"]
    assert q["dtype"] == "float32+q4,q8" and f["dtype"] == "float32"
    # 4.5 to 8.5 bits a weight against 32
    assert 3 < f["bytes_per_token"] / q["bytes_per_token"] < 8
    for r in (q, f):
        assert r["decode_ms"] > 0 and r["floor_ms"] > 0
        assert r["floor_fraction"] == pytest.approx(r["floor_ms"] / r["decode_ms"])
    assert data["same_greedy_64"] is True
    assert {(p["shape"], p["rows"]) for p in data["products"]} == {
        (s, k) for s in ("lm_head", "up_proj") for k in (1, 4, 8, 16)}
