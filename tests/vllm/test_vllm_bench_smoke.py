"""bench/vllm_worker.py (what bench/vllm_bench.py runs for each backend) on a tiny workload:
its figures come out, a schema Onyx refuses is counted as refused, and outputs are checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).resolve().parents[2] / "bench" / "vllm_worker.py"


def test_worker_measures_the_onyx_backend(tmp_path, model_dir):
    point = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}},
             "required": ["x"], "additionalProperties": False}
    cases = {"coverage": [{"set": "t", "file": "ok.json", "schema": point},
                          {"set": "t", "file": "bad.json", "schema": {"type": "object", "properties": 3}}],
             "generate": [{"prompt": "A point as JSON: ", "schema": point}]}
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    out = subprocess.run([sys.executable, str(WORKER), "--backend", "onyx", "--cases", str(path), "--rounds", "1",
                          "--max-tokens", "24", "--model", model_dir], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["backend"] == "onyx" and r["versions"]["onyx"]
    assert (r["accepted"], r["schemas"]) == (1, 2)
    refused = next(c for c in r["cases"] if c["file"] == "bad.json")
    assert refused["status"] == "refused" and "InvalidSchemaError" in refused["error"]
    assert [x["batch"] for x in r["runs"]] == [1, 8]
    for run in r["runs"]:
        assert run["tokens"] > 0 and run["tokens_per_s"] > 0 and run["invalid"] == 0 and run["cut"] == 0
    assert r["mask_fill_us"]["steps"] > 0 and r["compile_ms"]["p50"] > 0
