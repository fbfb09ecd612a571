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

One module per group of subcommands (`grammar.py`: validate, repair; `chat.py`; `commands.py`:
serve, generate, models, bench; `common.py`: what they share). One subcommand per function
pair: `add_<name>(subparsers)` declares its arguments and `cmd_<name>(args) -> int` runs it and
returns the exit code. Exit codes: 0 success, 1 a negative
answer (the text is invalid, no repair within the cost limit), 2 a usage error or a grammar that
does not compile (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from onyx.cli import chat, commands, grammar
from onyx.cli.common import EXIT_OK, EXIT_USAGE, CliError

# The subcommands that run a model: on Linux they start again under jemalloc (onyx.cpu.malloc).
MODEL_COMMANDS = ("serve", "chat", "generate")

SUBCOMMANDS = (grammar.add_validate, grammar.add_repair, commands.add_serve, chat.add_chat, commands.add_generate,
               commands.add_models, commands.add_bench)


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
    if args.command in MODEL_COMMANDS and argv is None:  # the `onyx` command itself, not a caller's argv
        from onyx.cpu.malloc import restart_with_fast_allocator

        restart_with_fast_allocator()
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



def run() -> None:
    """The `onyx` console command: `main`, then an immediate exit once the output is flushed.

    The process leaves without Python's finalization: no thread that used MLX can then end
    while the interpreter finalizes (its thread-local destructors take the GIL and abort the
    process, "terminate called without an active exception"; see `onyx.scheduler._park_all`)."""
    try:
        code = main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - printed as Python would, then the same immediate exit
        import traceback

        traceback.print_exc()
        code = 1
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """Flushes stdout and stderr, then ends the process at once with `code`, without Python's
    finalization (see `run`; the test session ends the same way)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
