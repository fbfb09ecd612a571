"""Two-stage JSON repair: a tolerant parse by json_repair, then Onyx's exact repair.

`Grammar.repair` alone always answers with text the grammar accepts, priced by its default cost
model (the intent model, see the README). A tolerant parser first can read some mistakes more
like a person would (keys out of order, a whole extra field, Python's `None`), and the second
stage keeps the guarantee: whatever json_repair returns, or when it raises, Onyx's repair makes
it valid. On the repair corpora (bench/repair_bench.py) the pipeline finds the intended value
more often than the default alone; it is not the default of `Grammar.repair` because json_repair
is an optional dependency (the `bench` extra) and the Rust core never calls Python.
"""

from __future__ import annotations

import json

from onyx._grammar import Grammar, RepairResult


def _strict_loads(text: str):
    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=no_constants)


def pre_parse(text: str, schema: dict | None = None) -> str:
    """json_repair's reading of `text` (with `schema` in salvage mode when given), re-dumped
    compactly when it is strict JSON; `text` itself when json_repair raises. ImportError when
    json_repair is not installed."""
    import json_repair

    try:
        if schema is None:
            fixed = json_repair.repair_json(text)
        else:
            fixed = json_repair.repair_json(text, schema=schema, schema_repair_mode="salvage")
    except Exception:  # noqa: BLE001 - json_repair raises on texts it cannot fit; stage two repairs the original
        return text
    try:
        return json.dumps(_strict_loads(fixed), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError):
        return fixed


def repair_json(grammar: Grammar, text: str, *, schema: dict | None = None, **repair_args) -> RepairResult:
    """`grammar.repair` of json_repair's reading of `text` (see `pre_parse`). The result's edits
    and cost refer to the pre-parsed text, not to `text`."""
    return grammar.repair(pre_parse(text, schema), **repair_args)
