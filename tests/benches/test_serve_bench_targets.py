"""bench/serve_bench.py's target ratios, from a list of runs as the bench records them (the
bench itself starts three real servers and takes minutes: it is run by hand: docs/benchmarks.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.serve_bench import targets  # noqa: E402


def _run(server: str, load: str, clients: int, tok_s: float) -> dict:
    return {"server": server, "load": load, "clients": clients, "agg_tok_s": tok_s}


def test_targets_compare_clients_servers_and_revisions():
    runs = [_run("onyx", "free", 1, 25.0), _run("onyx", "free", 8, 100.0), _run("onyx", "json", 1, 50.0),
            _run("onyx", "json", 8, 90.0), _run("mlx-lm", "free", 8, 60.0), _run("onyx-base", "free", 1, 20.0),
            _run("onyx-base", "free", 8, 80.0), _run("onyx-base", "json", 8, 75.0)]
    t = targets(runs)
    assert t["onyx_free_8_vs_1"] == 4.0 and t["onyx_json_8_vs_1"] == 1.8
    assert t["onyx_json_8_vs_mlx_free_8"] == 1.5 and t["onyx_free_8_vs_mlx_free_8"] == 1.667
    assert t["onyx_free_1_vs_base_1"] == 1.25 and t["onyx_json_1_vs_base_1"] is None  # no base JSON at 1
    # --base-every: the base revision at other client counts is compared too
    assert t["onyx_free_8_vs_base"] == 1.25 and t["onyx_json_8_vs_base"] == 1.2
    assert t["onyx_regex_8_vs_mlx_free_8"] is None  # a load that did not run has no ratio
    assert "onyx_free_1_vs_base" not in t  # one client is already onyx_free_1_vs_base_1
