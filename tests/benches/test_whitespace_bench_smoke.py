"""Smoke test of bench/whitespace_bench.py: `--quick` answers two prompts under no constraint,
ws=0 and ws=1 with the default model, scores them with the unconstrained model, prints its table
and recommendation and writes a JSON whose numbers hold together: constrained outputs valid, the
whitespace each setting allows and no more, the unconstrained greedy output scored as its own
argmax (the teacher-forced positions line up), and a recommendation that follows the rule."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # loads the default model and decodes

ROOT = Path(__file__).resolve().parents[2]
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # a JSON string literal


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("whitespace_bench")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "whitespace_bench.py"), "--quick", "--settings", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads((out / "whitespace_bench.json").read_text())


def test_every_setting_is_summarized(bench_run):
    proc, data = bench_run
    meta = data["meta"]
    assert meta["settings"] == ["free", "ws=0", "ws=1"] and meta["tasks"] == ["person", "tool_args"]
    assert set(data["summary"]) == set(meta["settings"]) == set(data["outputs"])
    for name, s in data["summary"].items():
        assert s["outputs"] == 2 == len(data["outputs"][name])
        assert math.isfinite(s["mean_logprob"]) and s["mean_logprob"] < 0 and s["sum_logprob"] < 0, name
        assert 0 < s["tokens"] <= meta["max_tokens"] and 0 <= s["argmax_changed"] <= 1
        assert 0 <= s["whitespace_loops"] <= s["used_budget"] <= 2
        assert ("vs_compact" in s) == (name != "ws=0")
        if name != "free":
            assert s["valid"] == 1.0, name
    assert "mean lp" in proc.stdout and "recommended default: max_whitespace=" in proc.stdout


def test_outputs_are_scored_where_they_were_written(bench_run):
    _proc, data = bench_run
    # Greedy unconstrained decoding writes the model's argmax: scoring at the right positions finds
    # it again (one position off would change nearly every token).
    assert data["summary"]["free"]["argmax_changed"] <= 0.05
    for name, outs in data["outputs"].items():
        for o in outs:
            assert o["scored_tokens"] == o["tokens"] + (o["finish_reason"] == "stop"), (name, o["task"])
            assert o["mean_logprob"] == pytest.approx(o["sum_logprob"] / o["scored_tokens"])
            assert 0 < o["forwards"] <= o["tokens"] + 1


def test_each_setting_writes_the_whitespace_it_allows(bench_run):
    _proc, data = bench_run
    for name, limit in (("ws=0", 0), ("ws=1", 1)):
        for o in data["outputs"][name]:
            runs = [len(r) for r in re.findall(r"\s+", STRING.sub('""', o["text"]))]
            assert max(runs, default=0) <= limit, (name, o["text"])
    # the model pretty-prints these records when it may: ws=1 outputs hold whitespace
    assert data["summary"]["ws=1"]["whitespace_share"] > 0


def test_the_recommendation_follows_the_rule(bench_run):
    _proc, data = bench_run
    r, summary = data["recommended"], data["summary"]
    assert r["eligible"] == [k for k in ("ws=0", "ws=1")
                             if summary[k]["valid"] == 1.0 and summary[k]["whitespace_loops"] == 0]
    best = max(summary[k]["sum_logprob"] for k in r["eligible"])
    pick = f"ws={r['max_whitespace']}"
    assert summary[pick]["sum_logprob"] >= best - r["tolerance"]
    assert all(summary[k]["sum_logprob"] < best - r["tolerance"] for k in r["eligible"]
               if int(k[3:]) < r["max_whitespace"])
