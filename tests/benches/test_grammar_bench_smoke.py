"""Smoke test of bench/grammar_bench.py: `--quick --engines onyx` runs, writes its JSON, and the
walks it timed are valid under Onyx's own masks. Each peer library that is installed (the bench
extra, `make bench`) also runs a small quick bench next to Onyx and must give error-free rows;
a peer that is not installed is skipped."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench import harness, peers
from bench.corpus import GRAMMAR_PATTERNS, PERSON_SCHEMA
from bench.peers import PEER_PACKAGES, onyx_compile

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "grammar_bench.py"


def run_bench(out: Path, *args: str, timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads((out / "grammar_bench.json").read_text())


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("grammar_bench")
    proc, data = run_bench(out, "--engines", "onyx", "--section", "main", timeout=120)
    return proc, data, out


def test_quick_bench_writes_positive_numbers_for_every_pattern(bench_run):
    proc, data, out = bench_run
    rows = {r["pattern"]: r for r in data["rows"]}
    assert {r["engine"] for r in data["rows"]} == {"onyx"}
    assert {r["vocab"] for r in data["rows"]} == {"qwen2"}
    assert set(rows) == {p[0] for p in GRAMMAR_PATTERNS}
    for name, _kind, _spec, _sample in GRAMMAR_PATTERNS:
        r = rows[name]
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
    vocab = vocabs["qwen2"]
    eos = set(vocab.eos_token_ids)
    for name, kind, spec, sample in GRAMMAR_PATTERNS:
        r = next(r for r in data["rows"] if r["pattern"] == name)
        tokens = r["tokens"]
        assert b"".join(vocab.token_bytes(t) for t in tokens) == sample.encode(), name
        assert r["tokenization"].startswith("greedy, each token checked"), r["tokenization"]
        assert r["accepted"] is True
        # Walk again here: every token is in the mask, and the allowed counts the bench
        # recorded (EOS aside) are the ones the masks hold.
        g = onyx_compile(vocab, kind, spec)
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


def test_quick_pushdown_section_times_every_state_of_its_walks(tmp_path, vocabs):
    """The pushdown section on two context-free patterns (a recursive schema, a GBNF file): the
    sample's walk and a random walk, every state's mask timed cold and warm, and the random walk
    replays under Onyx's masks."""
    proc, data = run_bench(tmp_path, "--engines", "onyx", "--section", "pushdown", "--patterns", "tree,gbnf_json",
                           "--walk-len", "30", timeout=240)
    pd = data["pushdown"]
    assert data["rows"] == [] and pd["vocab"] == "qwen2"
    assert {r["pattern"] for r in pd["rows"]} == set(pd["walks"]) == {"tree", "gbnf_json"}
    for r in pd["rows"]:
        assert r["error"] is None, r["error"]
        walks = pd["walks"][r["pattern"]]["walks"]
        assert [w["name"] for w in walks] == ["sample", "random0"] and 0 < walks[1]["tokens"] <= 30
        assert r["steps"] == sum(w["tokens"] + 1 for w in walks) and r["rejected"] == [] and r["cut_by_time"] == 0
        for phase in ("cold", "warm"):
            m = r[phase]["mask"]
            assert 0 < m["median_us"] <= m["p99_us"] <= m["max_us"]
        assert r["warm"]["mask"]["n"] == r["steps"] * r["warm_passes"]
    assert "Pushdown walks" in proc.stdout and "Targets (Onyx, pushdown)" in proc.stdout
    # The random walk is drawn from Onyx's masks with the recorded seed: the same walk again
    import bench.grammar_pushdown as gb

    vd = peers.VocabData("qwen2")
    for pi, (name, kind, spec, sample) in enumerate(p for p in GRAMMAR_PATTERNS if p[0] in ("tree", "gbnf_json")):
        g = onyx_compile(vocabs["qwen2"], kind, spec)
        toks, _ = vd.tokenize_sample(kind, spec, sample)
        walks = gb.make_walks(vd, g, toks, 1, 30, pd["walks"][name]["seed"])
        assert [len(w["tokens"]) for w in walks] == [w["tokens"] for w in pd["walks"][name]["walks"]]


def test_xgrammar_ebnf_writes_empty_alternatives_outside_strings():
    assert peers.xgrammar_ebnf('ws ::= | " " | "\\n" [ |]\nb ::= ("|" | ) c # a | | b\n') == \
        'ws ::= "" | " " | "\\n" [ |]\nb ::= ("|" | "" ) c # a | | b\n'


@pytest.mark.parametrize("peer", sorted(PEER_PACKAGES))
def test_installed_peer_gives_clean_rows_next_to_onyx(peer, tmp_path):
    if importlib.util.find_spec(PEER_PACKAGES[peer]) is None:
        pytest.skip(f"{PEER_PACKAGES[peer]} is not installed (the bench extra: make bench)")
    _proc, data = run_bench(tmp_path, "--vocab", "smollm2", "--engines", f"onyx,{peer}",
                            "--patterns", "digits4,person", "--no-plot", timeout=300)
    onyx_rows = {r["pattern"]: r for r in data["rows"] if r["engine"] == "onyx"}
    rows = {r["pattern"]: r for r in data["rows"] if r["engine"] == peer}
    assert set(rows) == set(onyx_rows) == {"digits4", "person"}
    for name, r in rows.items():
        assert r["error"] is None, f"{peer} {name}: {r['error']}"
        assert r["errors"] == [], f"{peer} {name}: {r['errors']}"
        assert r["accepted"] is True
        assert r["tokens"] == onyx_rows[name]["tokens"]  # the same walk for every engine
        assert r["first_mask_ms"] > 0 and r["step_mean_us"] > 0 and r["cold_step_mean_us"] > 0
        assert r["n_steps"] == len(r["mask_signatures"]) == onyx_rows[name]["n_steps"]
        assert r["ratio_vs_onyx"]["step"] > 0
    # On a plain regex every engine allows exactly the same tokens at every step.
    assert rows["digits4"]["mask_diff_vs_onyx"]["relation"] == "equal", rows["digits4"]["mask_diff_vs_onyx"]


def _sleep(_adapter, seconds: float) -> None:  # a worker call that outlives its timeout
    time.sleep(seconds)


def test_adapter_worker_compiles_and_is_killed_past_its_timeout():
    """What a bench gets from `harness.Worker` + `peers.open_adapter`: compile times from the
    worker, a compile error as an error string, and a hung call killed at its timeout."""
    w = harness.Worker(peers.open_adapter, ("onyx", "smollm2"), timeout=120)
    try:
        assert w.error is None and w.info["vocab_load_ms"] > 0
        res, err = w.run(peers.compile_task, {"kind": "schema", "spec": PERSON_SCHEMA}, timeout=60)
        assert err is None and res["first_mask_ms"] >= res["compile_ms"] > 0
        res, err = w.run(peers.compile_task, {"kind": "regex", "spec": "[0-9]{4}(ab"}, timeout=60)
        assert res is None and err.startswith("InvalidRegexError"), err
        assert w.alive()
        res, err = w.run(_sleep, 60, timeout=1)
        assert res is None and err == "timed out after 1 s (worker killed)"
        assert not w.alive()
    finally:
        w.close()
