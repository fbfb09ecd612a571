"""Structure specs: constraints made of segments, compiled by the grammar core into one DFA.

A spec is plain JSON-able data (the syntax is in docs/architecture.md, "Structures", and in
`grammar_engine/src/structure/mod.rs`): a string is literal text, a list is a sequence, and a
dict has one kind key (`text`, `regex`, `json_schema`, `gbnf`, `lark`, `token`, `free_text`,
`until`, `sequence`, `any_of`, `repeat`, `optional`, `json_string`).
`Vocabulary.compile_structure(spec)` returns an ordinary `Grammar`. The functions here only
spell specs (so callers read like the structure they build) and deal with the one thing a
structure adds to a grammar: special tokens, which the grammar's DFA reads as marker bytes
(`Grammar.special_tokens`).

    spec = [until("</think>"), "\\n", json_schema(schema)]
    grammar = vocab.compile_structure(spec)
"""

from __future__ import annotations

from typing import Any

Spec = Any  # str | list | dict: JSON-able


def text(s: str) -> dict:
    return {"text": s}


def regex(pattern: str) -> dict:
    return {"regex": pattern}


def json_schema(schema: dict | bool, *, max_whitespace: int | None = None) -> dict:
    node: dict = {"json_schema": schema}
    if max_whitespace is not None:
        node["max_whitespace"] = max_whitespace
    return node


def token(name: str | int) -> dict:
    """One token by its text or id: that token alone where the vocabulary marks it special,
    else its text."""
    return {"token": name}


def free_text(*without: Spec) -> dict:
    """Any text containing none of the stops (texts or `token(...)`s)."""
    return {"free_text": {"without": list(without)}} if without else {"free_text": True}


def until(*stops: Spec) -> dict:
    """Free text without the stops, then one of them."""
    return {"until": list(stops) if len(stops) > 1 else stops[0]}


def seq(*parts: Spec) -> list:
    return [p for p in parts if p != ""]


def any_of(*alternatives: Spec) -> Spec:
    return alternatives[0] if len(alternatives) == 1 else {"any_of": list(alternatives)}


def repeat(item: Spec, *, min: int = 0, max: int | None = None, separator: Spec | None = None) -> dict:
    node: dict = {"repeat": item, "min": min, "max": max}
    if separator not in (None, ""):
        node["separator"] = separator
    return node


def optional(item: Spec) -> dict:
    return {"optional": item}


def json_string(item: Spec) -> dict:
    """The strings of `item` as JSON strings: quoted, each byte escaped as serde_json writes it
    (`\\"`, `\\\\`, `\\n`, `\\u001b`, ...). `item` may embed a grammar (`{"lark": ...}`) but no
    special token."""
    return {"json_string": item}


def marked(vocab, s: str, markers: tuple[str, ...] = ()) -> Spec:
    """Literal text `s` in which each of `markers` that the vocabulary has as one token becomes
    a `token` node (so a special token such as `[TOOL_CALLS]` is that token, and an ordinary
    one such as Qwen2's `<tool_call>` stays text any tokens may spell)."""
    present = [m for m in markers if m and vocab.find_tokens(m)]
    parts: list[Spec] = []
    rest = s
    while rest:
        hits = [(rest.find(m), m) for m in present if m in rest]
        if not hits:
            parts.append(rest)
            break
        at, m = min(hits)
        if at:
            parts.append(rest[:at])
        parts.append(token(m))
        rest = rest[at + len(m):]
    return parts[0] if len(parts) == 1 else parts


def pieces(grammar, data: bytes) -> list[bytes | int]:
    """Splits bytes in a grammar's spelling (`forced_bytes`, `spell`) into text runs and the
    special token ids their marker bytes stand for: what a jump-forward draft must emit."""
    by_byte = {m[0]: t for t, m in grammar.special_tokens.items()}
    out: list[bytes | int] = []
    run = bytearray()
    for b in data:
        t = by_byte.get(b)
        if t is None:
            run.append(b)
            continue
        if run:
            out.append(bytes(run))
            run.clear()
        out.append(t)
    if run:
        out.append(bytes(run))
    return out
