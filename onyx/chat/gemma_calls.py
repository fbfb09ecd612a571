"""FunctionGemma's argument syntax: JSON-like, with bare keys and `<escape>`-quoted strings.

    <start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}<end_function_call>

Objects are `{key:value,...}`, lists `[value,...]`, strings `<escape>text<escape>` (no other
quoting or escaping), and numbers, booleans and null are written as in JSON. This module turns
JSON values into that syntax (`to_gemma`), back (`parse_gemma`), and a JSON Schema into a
structure spec for it (`arguments_spec`), for the schema subset such arguments use: objects with
properties (members in declared order, optional ones optional), arrays, strings (free, `enum`,
`const`), integers, numbers, booleans and null. Anything else (string lengths, patterns and
formats, number bounds, combinators) raises `UnsupportedToolSchema` rather than being ignored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from onyx.grammar import structure as st
from onyx.errors import RequestError

ESCAPE = "<escape>"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
INTEGER_REGEX = r"-?(?:0|[1-9][0-9]*)"
NUMBER_REGEX = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"


# Keywords this converter honours, and annotations it may ignore.
_KNOWN = {"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum",
          "const", "description", "title", "default", "examples", "$schema", "$comment"}


class UnsupportedToolSchema(RequestError):
    """A `parameters` schema that FunctionGemma's syntax cannot be constrained to here."""

    def __init__(self, message: str) -> None:
        super().__init__(message, param="tools")


def to_gemma(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{to_gemma(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_gemma(v) for v in value) + "]"
    if isinstance(value, str):
        return ESCAPE + value + ESCAPE
    return json.dumps(value)


def parse_gemma(text: str) -> Any:
    """The value `text` writes; raises ValueError when it is not one whole value."""
    value, end = _value(text, 0)
    if end != len(text):
        raise ValueError(f"unexpected {text[end:end + 10]!r} at {end}")
    return value


def value_end(text: str) -> int | None:
    """Where the value starting at text[0] ends, or None when it is not complete yet (for the
    streaming parser)."""
    try:
        return _value(text, 0)[1]
    except ValueError:
        return None


def _value(s: str, i: int) -> tuple[Any, int]:
    if s.startswith(ESCAPE, i):
        end = s.find(ESCAPE, i + len(ESCAPE))
        if end < 0:
            raise ValueError("unterminated string")
        return s[i + len(ESCAPE):end], end + len(ESCAPE)
    if s.startswith("{", i):
        out: dict = {}
        i += 1
        if s.startswith("}", i):
            return out, i + 1
        while True:
            m = _KEY.match(s, i)
            if not m or not s.startswith(":", m.end()):
                raise ValueError(f"expected key: at {i}")
            out[m.group()], i = _value(s, m.end() + 1)
            if s.startswith(",", i):
                i += 1
            elif s.startswith("}", i):
                return out, i + 1
            else:
                raise ValueError(f"expected , or }} at {i}")
    if s.startswith("[", i):
        items: list = []
        i += 1
        if s.startswith("]", i):
            return items, i + 1
        while True:
            v, i = _value(s, i)
            items.append(v)
            if s.startswith(",", i):
                i += 1
            elif s.startswith("]", i):
                return items, i + 1
            else:
                raise ValueError(f"expected , or ] at {i}")
    for word, v in (("true", True), ("false", False), ("null", None)):
        if s.startswith(word, i):
            return v, i + len(word)
    m = _NUMBER.match(s, i)
    if m and m.end() < len(s):  # a number is complete only once something follows it
        return json.loads(m.group()), m.end()
    raise ValueError(f"expected a value at {i}")


def arguments_spec(schema: dict, vocab, path: str = "parameters") -> st.Spec:
    """A structure spec for the arguments `schema` allows, in FunctionGemma's syntax (`<escape>`
    as its token where `vocab` has one)."""
    if not isinstance(schema, dict):
        raise UnsupportedToolSchema(f"{path}: expected an object schema")
    for key in schema:
        if key not in _KNOWN:
            raise UnsupportedToolSchema(f"{path}: '{key}' is not supported for FunctionGemma's argument syntax")
    if "const" in schema:
        return _literal(schema["const"], vocab, path)
    if "enum" in schema:
        return st.any_of(*(_literal(v, vocab, path) for v in schema["enum"]))
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        return st.any_of(*(arguments_spec({**schema, "type": k}, vocab, path) for k in kind))
    if kind == "object":
        return _object(schema, vocab, path)
    if kind == "array":
        item = arguments_spec(schema.get("items", {"type": "string"}), vocab, f"{path}/items")
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        return st.seq("[", st.repeat(item, min=lo, max=hi, separator=","), "]")
    if kind == "string":
        esc = _escape(vocab)
        return st.seq(esc, st.free_text(esc), esc)
    if kind == "integer":
        return st.regex(INTEGER_REGEX)
    if kind == "number":
        return st.regex(NUMBER_REGEX)
    if kind == "boolean":
        return st.any_of("true", "false")
    if kind == "null":
        return "null"
    raise UnsupportedToolSchema(f"{path}: type {kind!r} is not supported for FunctionGemma's argument syntax")


def _escape(vocab) -> st.Spec:
    return st.marked(vocab, ESCAPE, (ESCAPE,))


def _literal(value: Any, vocab, path: str) -> st.Spec:
    if isinstance(value, str):
        if ESCAPE in value:
            raise UnsupportedToolSchema(f"{path}: a string cannot contain {ESCAPE}")
        return st.seq(_escape(vocab), value, _escape(vocab))
    return to_gemma(value)


def _object(schema: dict, vocab, path: str) -> st.Spec:
    """Members in declared order, required ones always. A comma goes before every member but
    the first one written: after a member, the rest is a plain sequence; before any, each
    optional member is either the first one written or skipped (quadratic, not exponential)."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    if schema.get("additionalProperties") not in (None, False) and not props:
        raise UnsupportedToolSchema(f"{path}: free-form objects are not supported for FunctionGemma")
    for k in props:
        if not _KEY.fullmatch(k):
            raise UnsupportedToolSchema(f"{path}: property name {k!r} cannot be written as a bare key")
    members = [(f"{k}:", arguments_spec(v, vocab, f"{path}/properties/{k}"), k in required) for k, v in props.items()]

    def after(i: int) -> list:
        """Members i.. once one has been written."""
        return [st.seq(",", key, value) if needed else st.optional(st.seq(",", key, value))
                for key, value, needed in members[i:]]

    def first(i: int) -> st.Spec:
        """Members i.. when none has been written yet."""
        if i == len(members):
            return ""
        key, value, needed = members[i]
        written = st.seq(key, value, *after(i + 1))
        return written if needed else st.any_of(written, first(i + 1))

    return st.seq("{", first(0), "}")
