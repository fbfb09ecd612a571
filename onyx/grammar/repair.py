"""Two-stage JSON repair: a tolerant parse by json_repair, then Onyx's exact repair.

`Grammar.repair` alone always answers with text the grammar accepts, priced by its default cost
model (the intent model: docs/architecture.md, "Repair"). A tolerant parser first can read some
mistakes more like a person would (keys out of order, a whole extra field, Python's `None`), and
the second stage keeps the guarantee: whatever json_repair returns, or when it raises, Onyx's repair makes
it valid. On the repair corpora (bench/repair_bench.py) the pipeline, with json_repair's salvage
mode reading the schema, finds the intended value more often than either stage alone, so it is the
default of `onyx repair --schema` and of the server's `/v1/repair` for a JSON Schema (json-repair
is a dependency). `Grammar.repair` itself stays the one-stage exact search: the Rust core never
calls Python.
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
    """`grammar.repair` of json_repair's reading of `text` (see `pre_parse`); a text the grammar
    already accepts is left as it is (cost 0). Otherwise the result's edits and cost refer to the
    pre-parsed text, not to `text`."""
    if grammar.validate(text).valid:
        return grammar.repair(text, **repair_args)
    return grammar.repair(pre_parse(text, schema), **repair_args)


COSTS = ("insert_cost", "delete_cost", "substitute_cost")


def repair_for_schema(grammar: Grammar, text: str, schema: dict, *, max_whitespace: int = 0,
                      two_stage: bool = True, **repair_args) -> tuple[RepairResult, bool]:
    """Onyx's default repair of a text meant to be JSON for `schema` (the CLI's and the server's):
    json_repair's salvage reading, then the exact repair (`repair_json`), when the grammar allows
    no whitespace between tokens (`max_whitespace` 0: re-dumping loses no layout), no edit cost is
    given and the text is not valid already; otherwise the one-stage repair of the text itself.
    Returns the result and whether the two stages ran (then the edits refer to json_repair's
    reading)."""
    given = any(repair_args.get(c) is not None for c in COSTS)
    if two_stage and max_whitespace == 0 and not given and not grammar.validate(text).valid:
        return grammar.repair(pre_parse(text, schema), **repair_args), True
    return grammar.repair(text, **repair_args), False

