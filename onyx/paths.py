"""Where Onyx keeps what it fetches and builds: `$ONYX_CACHE`, else `~/.cache/onyx` (model
assets, converted models, the BLAS shim, tokenizer self-test results)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$ONYX_CACHE`, else `~/.cache/onyx`."""
    return Path(os.environ.get("ONYX_CACHE") or Path.home() / ".cache" / "onyx")
