"""Smoke test of bench/integrations_bench.py: `--quick --out DIR` runs mlx-lm's generate on the
default model with no processor and with Onyx's (and llguidance's, when the bench extra is
installed), prints its table and writes a JSON with positive rates, Onyx's outputs valid and the
full-mask run's tokens equal to the unconstrained ones. Targets are not asserted."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "integrations_bench.py"
GRAMMARS = ("full_mask", "lower", "json_schema")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("integrations_bench")
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads((out / "integrations_bench.json").read_text())


@pytest.mark.slow
def test_rates_outputs_and_sections(bench_run):
    proc, data = bench_run
    with_llguidance = importlib.util.find_spec("llguidance") is not None
    modes = {"none", "onyx"} | ({"llguidance"} if with_llguidance else set())
    assert set(data["decode"]) == set(GRAMMARS)
    for key, entry in data["decode"].items():
        assert set(entry["modes"]) == modes, key
        for mode, m in entry["modes"].items():
            assert m["tok_s_median"] > 0 and all(r["tok_s"] > 0 and r["tokens"] > 0 for r in m["runs"]), (key, mode)
            if mode != "none":
                assert m["median_paired_ratio"] > 0
                assert all(isinstance(r["valid"], bool) for r in m["runs"]), (key, mode)
        # Onyx's mask is budget-aware: valid within 32 tokens (llguidance's may be cut short)
        assert all(r["valid"] is True for r in entry["modes"]["onyx"]["runs"]), key
        p = data["processor_us"][key]
        assert p["onyx"]["median_us"] > 0 and p["eval_only_us"] > 0
        assert ("llguidance" in p) == with_llguidance
    assert data["decode"]["full_mask"]["same_tokens_as_unconstrained"]["onyx"] is True
    c = data["construction"]
    assert c["onyx_first_s"] > 0 and c["onyx_cached_s"] > 0
    assert isinstance(data["targets"]["onyx_overhead_le_3pct"]["holds"], bool)
    assert ("onyx_ahead_of_llguidance" in data["targets"]) == with_llguidance
    for text in ("1. mlx-lm stream_generate", "2. processor time per call", "3. making a processor", "load average"):
        assert text in proc.stdout, text
