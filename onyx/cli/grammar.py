"""`onyx validate` and `onyx repair`: check or fix a text against a regex or JSON Schema.

Grammars are compiled against the default model's tokenizer (SmolLM2, fetched once into the
cache): a grammar only allows bytes some token of the vocabulary contains.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from onyx.cli.common import (CONTEXT_BYTES, DEFAULT_MODEL, EXIT_NEGATIVE, EXIT_OK, CliError, non_negative_float,
                             non_negative_int, positive_int)


def _add_grammar_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--regex", metavar="R", help="a regex the whole text must match")
    src.add_argument("--schema", metavar="FILE", help="a JSON Schema file")
    p.add_argument("--max-whitespace", type=non_negative_int, default=None, metavar="N",
                   help="with --schema: whitespace characters allowed between JSON tokens (default 0: compact)")


def _add_text_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", nargs="?", default="-", metavar="TEXT",
                   help="the text itself; '-' or omitted reads stdin")
    p.add_argument("--raw", action="store_true",
                   help="keep stdin exactly (by default one trailing newline, as `echo` adds, is dropped)")


def _load_vocab():
    import onyx
    from onyx.models import assets

    try:
        path = assets.fetch(DEFAULT_MODEL, quiet=True)
    except assets.AssetError as e:
        raise CliError(str(e).splitlines()[0]) from None
    return onyx.Vocabulary.from_gguf(path)


def _compile(args):
    """The grammar named by --regex / --schema (and the schema, parsed, on `args.schema_value`)."""
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
        args.schema_value = schema
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


def add_validate(sub) -> None:
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


def add_repair(sub) -> None:
    p = sub.add_parser("repair", help="the closest text that matches a regex or JSON Schema",
                       description="Prints the repaired text (exit 0); exit 1 when no repair is found "
                                   "within --max-cost or the search budget. By default edits are priced "
                                   "by the intent model (prose and code fences around the value deleted, "
                                   "quotes swapped, a truncated value closed); any of --insert-cost, "
                                   "--delete-cost, --substitute-cost selects plain byte edit distance.")
    _add_grammar_args(p)
    _add_text_args(p)
    p.add_argument("--json", action="store_true",
                   help="print {text, cost, lower_bound, status, edits} as JSON instead of the text")
    p.add_argument("--max-cost", type=non_negative_int, metavar="N", help="give up when every repair costs more")
    p.add_argument("--deadline-ms", type=non_negative_float, metavar="MS",
                   help="time budget: past it, the best repair found so far (status 'anytime')")
    p.add_argument("--max-expansions", type=non_negative_int, metavar="N", help="search budget in node expansions")
    p.add_argument("--no-pre-parse", dest="pre_parse", action="store_false",
                   help="with --schema: repair the text itself; by default json_repair reads it first (salvage "
                        "mode, with the schema) and Onyx repairs that reading, so the edits and cost refer to it")
    p.add_argument("--insert-cost", type=positive_int, metavar="C",
                   help="plain edit distance: cost of inserting a byte (1 when another cost is given)")
    p.add_argument("--delete-cost", type=positive_int, metavar="C",
                   help="plain edit distance: cost of deleting a byte (1 when another cost is given)")
    p.add_argument("--substitute-cost", type=positive_int, metavar="C",
                   help="plain edit distance: cost of replacing a byte (1 when another cost is given)")
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
    kwargs = dict(insert_cost=args.insert_cost, delete_cost=args.delete_cost,
                  substitute_cost=args.substitute_cost, max_expansions=args.max_expansions)
    if args.schema is not None:
        from onyx.grammar.repair import repair_for_schema

        r, _ = repair_for_schema(g, data.decode("utf-8", errors="replace"), args.schema_value,
                                 max_whitespace=args.max_whitespace or 0, two_stage=args.pre_parse,
                                 max_cost=args.max_cost, deadline_ms=args.deadline_ms, **kwargs)
    else:
        r = g.repair(data, args.max_cost, args.deadline_ms, **kwargs)
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


