"""Shared fixtures: the three real tokenizers the grammar tests run on.

They are fetched by `make test` (`python -m onyx.models.assets fetch ...`) into ~/.cache/onyx; a test
run without them fails with the command to run rather than skipping silently.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import onyx
import onyx.cpu  # noqa: F401  (OpenBLAS before any test module imports mlx.core)
from onyx.models import assets

# The tests share inputs and helpers with the benches (`bench.corpus`, `bench.dyck`, ...): the
# checkout's root must be importable (an editable install puts it on sys.path too).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

# tests/vllm runs in vLLM's own environment (`make vllm-test`), not in this one.
collect_ignore = ["vllm"]


def pytest_configure(config):
    # Registered here until pyproject.toml's pytest settings list it.
    config.addinivalue_line("markers", "slow: takes minutes (real-data samples, bench smoke runs)")


VOCABS = {
    "smollm2": "smollm2",  # 49,152 tokens, byte-level BPE
    "qwen2": "qwen2-tokenizer",  # 152,064 tokens, byte-level BPE
    "gemma3": "gemma3-tokenizer",  # 262,144 tokens, SentencePiece with byte fallback
}


def gguf_path(asset: str):
    path = assets.asset_path(asset)
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python -m onyx.models.assets fetch {asset}` (make test does)")
    return path


@pytest.fixture(scope="session")
def vocabs() -> dict[str, onyx.Vocabulary]:
    return {name: onyx.Vocabulary.from_gguf(gguf_path(asset)) for name, asset in VOCABS.items()}


@pytest.fixture(scope="session")
def smollm2(vocabs) -> onyx.Vocabulary:
    return vocabs["smollm2"]


@pytest.fixture(scope="session")
def hf_tokenizers(vocabs, tmp_path_factory):
    """Each model's own tokenizer, rebuilt from its GGUF as a Hugging Face tokenizer.json."""
    from tokenizers import Tokenizer

    from onyx.models.gguf_tokenizer import write_tokenizer_files

    out = {}
    for name, asset in VOCABS.items():
        path = write_tokenizer_files(gguf_path(asset), tmp_path_factory.mktemp(name))
        out[name] = Tokenizer.from_file(str(path))
    return out


@pytest.fixture(scope="session")
def engine():
    """The embedded default model (SmolLM2-135M-Instruct), loaded once per test session."""
    import onyx

    return onyx.Engine()


# The test process holds engines whose scheduler threads have used MLX, and threads the tests
# started. A thread that ends while Python finalizes can abort the process in its native
# thread-local destructors ("terminate called without an active exception"; the engine's own
# worker is parked at exit for this reason, see onyx.scheduler and tests/test_scheduler.py). So
# the session ends like the `onyx` command does: once pytest has written everything, the process
# exits at once with pytest's own exit status.
_session = {"status": None}


def pytest_sessionfinish(session, exitstatus):
    _session["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    status = _session["status"]
    if status is None:
        return
    from onyx.cli import exit_now

    exit_now(status)
