"""Broken JSON as LLMs write it: the shared corpus of `tests/test_repair.py` and
`bench/repair_bench.py`.

Each `Case` is one typical mistake against one of three schemas (a person record, an order with
an items array, a ticket with an enum field). It carries

  * `expected`: the value the writer meant, when the broken text determines it (`None` when it
    does not: a truncated text, a value with no JSON reading such as `NaN`, an enum value whose
    intended member is anyone's guess);
  * `costs`: the edit costs Onyx's `Grammar.repair` is called with for this case (one of the
    three profiles below), and `max_whitespace`: the grammar's whitespace allowance.

Cost profiles (keyword arguments of `Grammar.repair`):

  UNIT  insert 1, delete 1, substitute 1: plain edit distance. Used wherever it gives the
        intended answer.
  SWAP  insert 2, delete 1, substitute 1: replacing a character in place is cheaper than
        inserting the right one next to it, so `'` becomes `"` instead of being kept inside a
        string with a `"` added beside it (single quotes, Python reprs).
  TRIM  insert 20, delete 1, substitute 20: deleting is 20x cheaper than writing, so prose,
        code fences, whitespace and unknown fields around the JSON are deleted instead of being
        absorbed into a string value (with unit costs, `...null}\\nThanks!` is cheapest to repair
        as `..."null}Thanks!"}`: 4 edits against 8 deletions).

Minimal edit distance is not intent: `note` says, for each case where Onyx's answer is valid
but not `expected`, which cheaper reading it finds instead.

This module has no dependencies (plain data), so both the tests and the bench import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "active": {"type": "boolean"},
        "nickname": {"type": ["string", "null"]},
    },
    "required": ["name", "age", "email", "active", "nickname"],
    "additionalProperties": False,
}

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^ORD-[0-9]{4}$"},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
                    "qty": {"type": "integer", "minimum": 1},
                    "price": {"type": "number"},
                },
                "required": ["sku", "qty", "price"],
                "additionalProperties": False,
            },
        },
        "status": {"enum": ["new", "paid", "shipped", "cancelled"]},
    },
    "required": ["id", "items", "status"],
    "additionalProperties": False,
}

TICKET = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "priority": {"enum": ["low", "medium", "high", "urgent"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    },
    "required": ["title", "priority", "tags"],
    "additionalProperties": False,
}

SCHEMAS = {"person": PERSON, "order": ORDER, "ticket": TICKET}

UNIT: dict[str, int] = {}
SWAP = {"insert_cost": 2}
TRIM = {"insert_cost": 20, "substitute_cost": 20}

# The intended documents, compact (the grammars' default output form).
PERSON_OK = '{"name":"Ada Lovelace","age":36,"email":"ada@example.com","active":true,"nickname":null}'
ORDER_OK = ('{"id":"ORD-0042","items":[{"sku":"AB123","qty":2,"price":9.99},'
            '{"sku":"CD456","qty":1,"price":24.5}],"status":"paid"}')
TICKET_OK = '{"title":"Login fails on Safari","priority":"high","tags":["auth","browser"]}'

_OK = {"person": PERSON_OK, "order": ORDER_OK, "ticket": TICKET_OK}


@dataclass(frozen=True)
class Case:
    name: str
    schema: str  # key of SCHEMAS
    text: str
    expected: object  # the intended value, or None when the text does not determine it
    costs: dict = field(default_factory=dict)
    max_whitespace: int = 0
    note: str = ""

    @property
    def schema_dict(self) -> dict:
        return SCHEMAS[self.schema]


def _case(name, schema, text, *, intended=True, costs=UNIT, max_whitespace=0, note=""):
    return Case(name, schema, text, json.loads(_OK[schema]) if intended else None,
                dict(costs), max_whitespace, note)


def _sub(schema: str, old: str, new: str) -> str:
    text = _OK[schema]
    assert old in text, (schema, old)
    return text.replace(old, new)


CASES: list[Case] = [
    # --- syntax slips -------------------------------------------------------------------------
    _case("trailing_comma_object", "person", PERSON_OK[:-1] + ",}"),
    _case("trailing_comma_array", "order", _sub("order", "24.5}]", "24.5},]")),
    _case("missing_comma", "ticket", _sub("ticket", '"high","tags"', '"high" "tags"')),
    _case("missing_closing_brace", "person", PERSON_OK[:-1]),
    _case("missing_quote_value", "person", _sub("person", '"Ada Lovelace"', '"Ada Lovelace')),
    _case("missing_quote_key", "person", _sub("person", '"age"', 'age"')),
    _case("unquoted_keys", "person", _sub("person", '"name"', "name").replace('"age"', "age")),
    _case("comment", "person", _sub("person", '"active":true,', '"active":true, // verified\n')),
    _case("single_quotes", "person", PERSON_OK.replace('"', "'"), costs=SWAP,
          note="unit costs keep the quotes inside the strings ('Ada Lovelace' as a value)"),
    _case("single_quotes_values", "ticket", _sub("ticket", '"high"', "'high'").replace('"auth"', "'auth'"),
          costs=SWAP),
    _case("python_literals", "person", _sub("person", "true", "True").replace("null", "None"),
          note="None becomes the string \"None\" (2 insertions) rather than null (4 substitutions): "
               "nickname allows strings"),
    _case("python_dict_repr", "ticket",
          "{'title': 'Login fails on Safari', 'priority': 'high', 'tags': ['auth', 'browser']}",
          costs=SWAP, max_whitespace=1,
          note="the two tags merge into one string \"auth', 'browser\" (2 edits) rather than four "
               "quotes being swapped"),
    _case("nan_price", "order", _sub("order", "9.99", "NaN"), intended=False,
          note="NaN has no JSON value; Onyx writes a number"),
    _case("number_as_string", "order", _sub("order", '"qty":2', '"qty":"2"')),
    # --- wrong values -------------------------------------------------------------------------
    _case("wrong_enum_case", "ticket", _sub("ticket", '"high"', '"High"')),
    _case("wrong_enum_misspelled", "order", _sub("order", '"paid"', '"payed"')),
    _case("wrong_enum_value", "ticket", _sub("ticket", '"high"', '"critical"'), intended=False,
          note="not a member: which one was meant is a guess (Onyx picks the closest spelling)"),
    # --- text around the JSON -----------------------------------------------------------------
    _case("prose_before", "person", "Sure! Here is the JSON: " + PERSON_OK, costs=TRIM,
          note="unit costs absorb the prose into the name"),
    _case("prose_after", "person", PERSON_OK + "\nLet me know if you need anything else!", costs=TRIM),
    _case("prose_both", "ticket", "Here you go:\n" + TICKET_OK + "\nHope this helps.", costs=TRIM),
    _case("markdown_fence", "person", "```json\n" + PERSON_OK + "\n```", costs=TRIM),
    _case("markdown_fence_prose", "order", "The order as JSON:\n\n```json\n" + ORDER_OK + "\n```"),
    _case("pretty_printed", "person", json.dumps(json.loads(PERSON_OK), indent=2), costs=TRIM,
          note="compact grammar: the whitespace is deleted"),
    _case("pretty_printed_trailing_comma", "order",
          json.dumps(json.loads(ORDER_OK), indent=2).replace('"paid"', '"paid",'), max_whitespace=8,
          note="grammar allows the indentation (up to 8 whitespace characters per gap)"),
    # --- fields -------------------------------------------------------------------------------
    _case("extra_field", "person", PERSON_OK[:-1] + ',"phone":"555-0100"}', costs=TRIM,
          note="the extra field is folded into the nickname string (\"phone:555-0100\"): 7 "
               "deletions are cheaper than the 19 that remove the field"),
    _case("reordered_keys", "person",
          '{"age":36,"name":"Ada Lovelace","email":"ada@example.com","active":true,"nickname":null}',
          note="the grammar fixes the schema's property order and edits cannot move a field: the "
               "repair rewrites the values in place (name \"36,\\\"name\\\":\\\"Ada Lovel\", age 2)"),
    _case("extra_field_last", "order", ORDER_OK[:-1] + ',"coupon":"SAVE10"}'),
    _case("extra_field_first", "ticket", '{"id":17,' + TICKET_OK[1:], costs=TRIM),
    # --- truncated output ---------------------------------------------------------------------
    _case("truncated_in_string", "person", PERSON_OK[:PERSON_OK.index("example")], intended=False),
    _case("truncated_in_items", "order", ORDER_OK[:ORDER_OK.index('"CD456"') + 4], intended=False),
    _case("truncated_after_items", "order", ORDER_OK[:ORDER_OK.index('],"status"')], intended=False),
]

assert len({c.name for c in CASES}) == len(CASES)
