"""bench/report.py: docs/benchmarks.md is what bench/results/*.json give, and the generator
follows its inputs (so the check can fail)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def test_the_benchmarks_doc_is_current():
    """Fails when a results file changed (or appeared) without `python bench/report.py` being run."""
    if _git("rev-parse", "--is-shallow-repository") in (None, "true"):
        pytest.skip("needs the git history: the commit each table was measured at comes from it")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "report.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_every_results_file_has_a_command_and_a_note():
    files = sorted(p.name for p in (ROOT / "bench" / "results").glob("*.json"))
    assert files, "no results files"
    missing = [f for f in files if f not in report.SOURCES]
    assert not missing, f"add these to SOURCES in bench/report.py (command, note): {missing}"
    for name, source in report.SOURCES.items():
        assert source.command.startswith("python bench/"), name
        script = source.command.split()[1]
        assert (ROOT / script).is_file(), f"{name}: {script} does not exist"


@pytest.fixture
def results(tmp_path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(ROOT / "bench" / "results", copy)
    return copy


def test_the_output_follows_the_inputs_and_nothing_else(results, tmp_path):
    first = report.generate(results)
    assert report.generate(results) == first  # same inputs, same bytes
    path = results / "serve_bench.json"
    data = json.loads(path.read_text())
    run = next(r for r in data["runs"] if r["server"] == "onyx" and r["clients"] == 8 and r["load"] == "json")
    run["agg_tok_s"] = 4321.5
    path.write_text(json.dumps(data))
    second = report.generate(results)
    assert second != first
    assert "| Onyx, json | 8 | 4,321.5 |" in second
    # and --check sees it: the document written from the first inputs is stale for the second
    doc = tmp_path / "benchmarks.md"
    doc.write_text(first)
    assert report.main(["--check", "--results", str(results), "--out", str(doc)]) == 1
    assert report.main(["--results", str(results), "--out", str(doc)]) == 0
    assert doc.read_text() == second
    assert report.main(["--check", "--results", str(results), "--out", str(doc)]) == 0


def test_a_results_file_without_an_entry_still_gets_a_section(results):
    (results / "new_bench.json").write_text(json.dumps({"meta": {"commit": "abcdef0123"}, "rows": []}))
    text = report.generate(results)
    assert "## new_bench" in text and "add an entry to SOURCES" in text
    assert "- Measured at: `abcdef0`" in text  # a commit the bench recorded wins over git's
