"""Smoke test of bench/grammar_bench.py: `--quick --engines onyx` runs, writes its JSON, and the
walks it timed are valid under Onyx's own masks. Peers are not needed (nor installed in CI)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "grammar_bench.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("grammar_bench_under_test", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _schemas_supported(vocab) -> bool:
    try:
        vocab.compile_json_schema({"type": "integer"})
        return True
    except Exception:  # noqa: BLE001 - JSON Schema support not landed yet
        return False


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("grammar_bench")
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--engines", "onyx", "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = json.loads((out / "grammar_bench.json").read_text())
    return proc, data, out


def test_quick_bench_writes_positive_numbers_for_every_pattern(bench_run, vocabs):
    proc, data, out = bench_run
    gb = _bench_module()
    rows = {r["pattern"]: r for r in data["rows"]}
    assert {r["engine"] for r in data["rows"]} == {"onyx"}
    assert {r["vocab"] for r in data["rows"]} == {"qwen2"}
    assert set(rows) == {p[0] for p in gb.PATTERNS}
    schemas = _schemas_supported(vocabs["qwen2"])
    for name, kind, _spec, _sample in gb.PATTERNS:
        r = rows[name]
        if kind == "schema" and not schemas:
            continue  # compile_json_schema is still a stub: these rows carry its error
        assert r["error"] is None, f"{name}: {r['error']}"
        assert r["errors"] == [], f"{name}: {r['errors']}"
        for col in ("first_mask_ms", "compile_ms", "eager_build_ms", "cold_step_mean_us",
                    "step_mean_us", "step_p99_us", "step_worst_state_us", "memory_bytes"):
            assert isinstance(r[col], (int, float)) and r[col] > 0, f"{name}.{col} = {r[col]!r}"
        assert r["step_p99_us"] >= r["step_median_us"] > 0
        assert r["all_states"]["states"] > 0 and r["all_states"]["max_us"] > 0
        assert r["n_steps"] == len(r["tokens"]) + 1 == len(r["step_per_step_median_us"])
    # The printed table and the target summary are there.
    assert "first ms" in proc.stdout and "Targets (Onyx)" in proc.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "grammar_bench.png").stat().st_size > 0


def test_quick_bench_walks_are_valid_under_onyx(bench_run, vocabs):
    _proc, data, _out = bench_run
    gb = _bench_module()
    vocab = vocabs["qwen2"]
    schemas = _schemas_supported(vocab)
    eos = set(vocab.eos_token_ids)
    for name, kind, spec, sample in gb.PATTERNS:
        r = next(r for r in data["rows"] if r["pattern"] == name)
        if kind == "schema" and not schemas:
            continue
        tokens = r["tokens"]
        assert b"".join(vocab.token_bytes(t) for t in tokens) == sample.encode(), name
        assert r["tokenization"].startswith("greedy, each token checked"), r["tokenization"]
        assert r["accepted"] is True
        # Walk again here: every token is in the mask, and the allowed counts the bench
        # recorded (EOS aside) are the ones the masks hold.
        g = gb.onyx_compile(vocab, kind, spec)
        s = g.initial_state
        counts = []
        for t in tokens + [None]:
            m = g.token_bitmask(s)
            allowed = set(np.flatnonzero(np.unpackbits(m.view(np.uint8), bitorder="little")[: vocab.size]).tolist())
            counts.append(len(allowed - eos))
            if t is None:
                break
            assert t in allowed, f"{name}: token {t} not allowed at step {len(counts) - 1}"
            s = g.advance(s, t)
        assert g.is_accepting(s)
        assert counts == [sig[0] for sig in r["mask_signatures"]], name
