"""Starting the server: the options shared by `python -m onyx.server` and `onyx serve`.

The model loads before the socket opens, so `GET /health` answering means the server is ready.
It binds 127.0.0.1 unless told otherwise; `--api-key` (or `$ONYX_API_KEY`) makes /v1/* require
`Authorization: Bearer <key>`.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
import time

from onyx.server import config


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="model to serve: a known name (smollm2, gemma3-270m), a .gguf file, an mlx-lm "
                        "folder or a Hugging Face id (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--draft-model", default=None, help="draft model for speculative decoding")
    p.add_argument("--dtype", default=None, choices=["quantized", "float32"],
                   help="weights: quantized (default: kept as the model stores them) or float32")
    p.add_argument("--host", default=config.DEFAULT_HOST,
                   help=f"address to bind (default {config.DEFAULT_HOST}: this machine only)")
    p.add_argument("--port", type=int, default=config.DEFAULT_PORT, help=f"port (default {config.DEFAULT_PORT})")
    p.add_argument("--api-key", default=None,
                   help="require 'Authorization: Bearer KEY' on /v1/* (default: $ONYX_API_KEY, else none)")
    p.add_argument("--max-body-bytes", type=int, default=config.DEFAULT_MAX_BODY_BYTES,
                   help=f"largest request body (default {config.DEFAULT_MAX_BODY_BYTES}); larger gets 413")
    p.add_argument("--max-tokens-limit", type=int, default=config.DEFAULT_MAX_TOKENS_LIMIT,
                   help=f"largest max_tokens a request may ask for (default {config.DEFAULT_MAX_TOKENS_LIMIT})")
    p.add_argument("--default-max-tokens", type=int, default=config.DEFAULT_MAX_TOKENS,
                   help=f"max_tokens when a request gives none (default {config.DEFAULT_MAX_TOKENS})")
    p.add_argument("--max-batch", type=int, default=config.DEFAULT_MAX_BATCH,
                   help=f"sequences decoded together in one batch (default {config.DEFAULT_MAX_BATCH}); "
                        f"more requests wait in the queue")
    p.add_argument("--max-queue", type=int, default=config.DEFAULT_MAX_QUEUE,
                   help=f"requests that may wait for the model (default {config.DEFAULT_MAX_QUEUE}); more get 503")
    p.add_argument("--grammar-cache-bytes", type=int, default=config.GRAMMAR_CACHE_BYTES,
                   help=f"bytes compiled grammars and their masks may hold (default {config.GRAMMAR_CACHE_BYTES}); least "
                        f"recently used dropped past it, and one grammar needing more is a 400")
    p.add_argument("--prefill-share", type=float, default=config.PREFILL_SHARE,
                   help=f"while requests decode, the most a new prompt's prefill may add to a step's time "
                        f"(default {config.PREFILL_SHARE:g}; higher: a faster first token for long prompts, slower "
                        f"streams meanwhile)")
    p.add_argument("--compile-nice", type=int, default=config.COMPILE_NICE,
                   help=f"nice value (0-19) grammar compilations run at, so that they yield the cores to the "
                        f"streams decoding (default {config.COMPILE_NICE}; 0: the server's own priority; Linux only)")
    p.add_argument("--compile-share", type=float, default=config.COMPILE_SHARE,
                   help=f"while requests decode, grammar compilations pause during each step and get this share "
                        f"of a plain step per step between steps (default {config.COMPILE_SHARE:g}; "
                        f"0: they run beside the steps)")
    p.add_argument("--body-timeout-s", type=float, default=config.DEFAULT_BODY_TIMEOUT_S,
                   help=f"seconds a request body may take to arrive (default {config.DEFAULT_BODY_TIMEOUT_S:g}); "
                        f"slower gets 408")
    p.add_argument("--context-length", type=int, default=None,
                   help="the longest prompt plus max_tokens a request may ask for (default: the model's context; "
                        "a smaller one bounds each request's KV memory and prefill time)")
    p.add_argument("--alias", action="append", default=None, metavar="NAME",
                   help="a name clients may use for the model (repeatable; default: onyx, default)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def serve(args: argparse.Namespace, *, make_engine=None) -> int:
    """Loads the model, then runs uvicorn until interrupted. Returns an exit status.

    `make_engine(model, **kwargs)` builds the engine (default `onyx.Engine`); the CLI passes one
    that shows download and conversion progress."""
    from onyx.cpu.malloc import limit_arenas

    limit_arenas()  # before the engine's threads start
    import onyx

    quiet_load = make_engine is not None  # a caller's factory reports its own progress
    make_engine = make_engine or (lambda model, **kw: onyx.Engine(model=model, **kw))

    api_key = args.api_key or os.environ.get("ONYX_API_KEY") or None
    kwargs = {"max_batch": args.max_batch, "grammar_cache_bytes": args.grammar_cache_bytes,
              "prefill_share": args.prefill_share, "compile_nice": args.compile_nice,
              "compile_share": args.compile_share, "dtype": args.dtype}
    if args.draft_model is not None:
        kwargs["draft_model"] = args.draft_model
    for name, value in (("max-body-bytes", args.max_body_bytes), ("max-tokens-limit", args.max_tokens_limit),
                        ("default-max-tokens", args.default_max_tokens), ("max-queue", args.max_queue),
                        ("max-batch", args.max_batch), ("grammar-cache-bytes", args.grammar_cache_bytes)):
        if value < 1:
            print(f"onyx serve: --{name} must be positive", file=sys.stderr)
            return 2
    if not 0 < args.prefill_share <= 100:
        print("onyx serve: --prefill-share must be above 0 (and at most 100)", file=sys.stderr)
        return 2
    if not 0 <= args.compile_share <= 100:
        print("onyx serve: --compile-share must be between 0 and 100", file=sys.stderr)
        return 2
    if not 0 <= args.compile_nice <= 19:
        print("onyx serve: --compile-nice must be between 0 and 19", file=sys.stderr)
        return 2
    if not args.body_timeout_s > 0:
        print("onyx serve: --body-timeout-s must be positive", file=sys.stderr)
        return 2
    if args.context_length is not None and args.context_length < 1:
        print("onyx serve: --context-length must be positive", file=sys.stderr)
        return 2
    if args.context_length is not None and args.context_length <= min(args.default_max_tokens, args.max_tokens_limit):
        print(f"onyx serve: --context-length {args.context_length} leaves no room for a prompt beside "
              f"--default-max-tokens {min(args.default_max_tokens, args.max_tokens_limit)} (lower that, or raise this)",
              file=sys.stderr)
        return 2
    server_config = config.ServerConfig(api_key=api_key, max_body_bytes=args.max_body_bytes,
                                        max_tokens_limit=args.max_tokens_limit,
                                        default_max_tokens=args.default_max_tokens, max_queue=args.max_queue,
                                        aliases=tuple(args.alias) if args.alias else config.DEFAULT_ALIASES,
                                        body_timeout_s=args.body_timeout_s, context_length=args.context_length)
    if not _is_loopback(args.host) and api_key is None:
        print(f"onyx serve: warning: binding {args.host} without an API key: anyone who can reach this "
              f"address can use the model (pass --api-key or set ONYX_API_KEY)", file=sys.stderr)

    t0 = time.perf_counter()
    if not quiet_load:
        print(f"onyx: loading model {args.model or 'default (SmolLM2-135M-Instruct)'}"
              + (f" with draft {args.draft_model}" if args.draft_model else "") + " ...", file=sys.stderr, flush=True)
    try:
        engine = make_engine(args.model, **kwargs)
    except (onyx.ModelError, onyx.RequestError) as e:
        print(f"onyx serve: {e}", file=sys.stderr)
        return 2
    if not quiet_load:
        print(f"onyx: loaded {engine.model_name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)

    import uvicorn

    from onyx.server.app import create_app

    app = create_app(engine, server_config)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(name)s: %(message)s")
    print(f"onyx: serving {engine.model_name} on http://{_url_host(args.host)}:{args.port}/v1"
          + (" (API key required)" if api_key else ""), file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5)
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m onyx.server", description="Serve a model over an "
                                "OpenAI-compatible HTTP API with guaranteed structured output.")
    add_serve_arguments(p)
    args = p.parse_args(argv)
    if argv is None:  # `python -m onyx.server` itself, not a caller's argv
        from onyx.cpu.malloc import restart_with_fast_allocator

        restart_with_fast_allocator()
    return serve(args)
