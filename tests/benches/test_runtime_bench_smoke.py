"""Smoke test of bench/runtime_bench.py: `--quick --out DIR` runs end to end on the default model,
prints its table and writes a JSON with positive decode rates for the unconstrained and the
constrained runs and every section the full run reports. Targets are not asserted (the machine
may be loaded); only that the numbers exist and are sane."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs a whole bench in quick mode

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "runtime_bench.py"

CONFIGS = ("unconstrained", "full_mask", "lower", "json_schema")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runtime_bench")
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads((out / "runtime_bench.json").read_text()), out


def test_json_has_every_section(bench_run):
    _proc, data, _out = bench_run
    for key in ("meta", "model", "bandwidth", "decode", "floor", "paged_vs_mlx", "step_interleaved",
                "cache_bench", "rollback_flatness", "prefix_ttft", "targets", "table"):
        assert key in data, key
    assert set(data["targets"]) == {"greedy_unconstrained_tok_s", "full_mask_overhead",
                                    "paged_within_5pct_of_mlx", "rollback_flat"}
    for t in data["targets"].values():
        assert isinstance(t["holds"], bool)
    assert data["meta"]["quick"] is True


def test_decode_rates_are_positive(bench_run):
    _proc, data, _out = bench_run
    configs = data["decode"]["configs"]
    assert set(configs) == set(CONFIGS) | {"mlx_lm_greedy"}
    for name, c in configs.items():
        assert c["tok_s_median"] > 0, name
        assert c["completion_tokens"] > 0, name
        assert all(r["tok_s"] > 0 for r in c["runs"]), name
    for name in CONFIGS[1:]:
        runs = configs[name]["runs"]
        assert all(r["valid"] is True for r in runs), f"{name}: constrained output not valid"
        r = data["decode"]["ratios_vs_unconstrained"][name]
        assert r["ratio_of_medians"] > 0 and r["median_paired_ratio"] > 0
    # the full-mask pattern allows every token the greedy model picks: same tokens, and the
    # paged engine and mlx-lm's cache agree token for token
    assert data["decode"]["full_mask_same_tokens"] is True
    assert data["decode"]["paged_vs_mlx_same_tokens"] is True
    steps = data["step_interleaved"]["configs"]
    assert set(steps) == set(CONFIGS)
    for name in CONFIGS:
        assert steps[name]["steps"] > 0 and steps[name]["median_step_ms"] > 0, name
    for name in CONFIGS[1:]:
        assert steps[name]["median_paired_step_ratio"] > 0, name


def test_floor_cache_and_prefix_sections(bench_run):
    _proc, data, _out = bench_run
    assert data["model"]["param_bytes"] > 50e6  # SmolLM2-135M as stored (4/8-bit): ~98 MB
    assert data["bandwidth"]["best_gbs"] > 0
    f = data["floor"]
    assert f["floor_tok_s_measured"] > 0 and f["ratio_to_notes_floor"] > 0 and f["ratio_to_measured_floor"] > 0
    p = data["paged_vs_mlx"]
    assert p["engine_tok_s"] > 0 and p["mlx_lm_tok_s"] > 0 and p["ratio_of_medians"] > 0
    cb = data["cache_bench"]
    assert cb["decode"] and all(r["same_tokens"] and r["paged_tok_per_s"] > 0 for r in cb["decode"])
    assert len(cb["rollback"]) >= 2
    for r in cb["rollback"]:
        assert r["rollback_1_us"] > 0 and r["rollback_8_us"] > 0 and r["rollback_24_us"] > 0
    t = data["prefix_ttft"]
    assert t["cold_cached_prompt_tokens"] == 0
    assert t["warm_cached_prompt_tokens"] > 0
    assert t["cold_total_ms"] > 0 and t["warm_total_ms"] > 0


def test_table_and_plot(bench_run):
    proc, _data, out = bench_run
    for text in ("quantity", "1. decode", "2. bandwidth floor", "3. paged vs mlx-lm", "4. rollback",
                 "5. prefix sharing", "load average"):
        assert text in proc.stdout, text
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "runtime_bench.png").stat().st_size > 0
