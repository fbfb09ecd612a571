"""`python -m onyx.server` refuses bad settings before it binds a port: a clear message and
exit status 2."""

from __future__ import annotations

import pytest

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onyx.server", "--port", "0", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_draft_model_with_another_vocabulary_is_refused():
    r = serve("--draft-model", "gemma3-270m")
    assert r.returncode == 2, r.stderr
    assert "does not share the target's vocabulary" in r.stderr and "Traceback" not in r.stderr


def test_non_positive_limits_are_refused():
    r = serve("--max-queue", "0")
    assert r.returncode == 2 and "--max-queue must be positive" in r.stderr
    r = serve("--prefill-share", "0")
    assert r.returncode == 2 and "--prefill-share must be above 0" in r.stderr
    r = serve("--context-length", "0")
    assert r.returncode == 2 and "--context-length must be positive" in r.stderr
    r = serve("--context-length", "200")  # below the default max_tokens (256): no prompt would fit
    assert r.returncode == 2 and "leaves no room for a prompt" in r.stderr


def test_the_served_context_is_at_most_the_models():
    from onyx.server.state import served_context

    assert served_context(8192, None) == 8192
    assert served_context(8192, 2048) == 2048
    assert served_context(8192, 100_000) == 8192  # a limit above the model's is the model's
    assert served_context(None, 2048) == 2048
    assert served_context(None, None) is None


def test_an_unknown_dtype_is_refused():
    r = serve("--dtype", "int4")
    assert r.returncode == 2 and "invalid choice: 'int4'" in r.stderr and "Traceback" not in r.stderr


def test_the_engine_holds_the_weights_as_asked():
    import onyx

    assert onyx.Engine(dtype="float32").describe()["dtype"] == "float32"
    with pytest.raises(onyx.ModelError, match="dtype must be one of"):
        onyx.Engine(dtype="int4")
