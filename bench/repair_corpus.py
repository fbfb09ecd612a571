#!/usr/bin/env python3
"""Broken JSON as LLMs write it: the generator of the repair corpora, and their loader.

Two corpora, kept apart:

  * test  (`bench/data/repair_test.json`, committed, never fitted on): hand-picked mistakes on
    five schemas (a person, an order, a ticket, an event with nested optional parts, a product
    review), each with the value the writer meant;
  * train (`bench/data/repair_train.json`, committed for reproducibility): the same families of
    mistakes drawn at random (seeded) on five *other* schemas and documents. The default repair
    cost model's weights are fitted on it (`bench/repair_fit.py`), never on the test corpus.

Every case has a schema, the broken text, and `intended`: the value a person reading the text
would say was meant. Families: prose around the JSON, code fences, two JSON values in one text,
Python literals and reprs, single quotes, comments, trailing commas, truncation at every depth,
wrong enum case, numbers as strings, missing required fields (the schema names a `default`,
and the intended value fills it in), and the usual syntax slips (missing comma, quote, brace,
unquoted keys, unescaped quotes and newlines in strings, extra fields).

    python bench/repair_corpus.py            # rewrites both files, prints the counts

`load(name)` returns `(schemas, cases)`; it has no dependency beyond the standard library, so
tests and benches share it.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    schema: str  # key into the corpus' schemas
    text: str
    intended: object


def load(name: str) -> tuple[dict, list[Case]]:
    """(schemas by name, cases) of the corpus `name` ("test" or "train")."""
    raw = json.loads((DATA / f"repair_{name}.json").read_text())
    return raw["schemas"], [Case(**c) for c in raw["cases"]]


# --------------------------------------------------------------------------------------------
# Schemas and intended documents
# --------------------------------------------------------------------------------------------

S = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}


def obj(props: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": props, "required": list(props) if required is None else required,
            "additionalProperties": False}


TEST_SCHEMAS = {
    "person": obj({
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "active": {"type": "boolean", "default": False},
        "nickname": {"type": ["string", "null"], "default": None},
    }),
    "order": obj({
        "id": {"type": "string", "pattern": "^ORD-[0-9]{4}$"},
        "items": {"type": "array", "minItems": 1, "items": obj({
            "sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
            "qty": {"type": "integer", "minimum": 1, "default": 1},
            "price": NUM,
        })},
        "status": {"enum": ["new", "paid", "shipped", "cancelled"]},
    }),
    "ticket": obj({
        "title": S,
        "priority": {"enum": ["low", "medium", "high", "urgent"]},
        "tags": {"type": "array", "items": S, "maxItems": 5, "default": []},
    }),
    "event": obj({
        "title": S,
        "when": obj({"date": S, "time": S}, ["date"]),
        "place": obj({"city": S, "room": obj({"floor": INT, "name": S}, [])}, []),
        "attendees": {"type": "array", "items": obj({"name": S, "role": {"enum": ["host", "guest"]}}, ["name"])},
        "public": BOOL,
    }, ["title"]),
    "review": obj({
        "product": S,
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
        "verdict": {"enum": ["recommend", "neutral", "avoid"]},
        "pros": {"type": "array", "items": S},
        "cons": {"type": "array", "items": S},
        "verified": {"type": "boolean", "default": False},
    }),
}

TEST_DOCS = {
    "person": [
        {"name": "Ada Lovelace", "age": 36, "email": "ada@example.com", "active": True, "nickname": None},
        {"name": "Alan Turing", "age": 41, "email": "alan@bletchley.uk", "active": False, "nickname": "Prof"},
    ],
    "order": [
        {"id": "ORD-0042", "items": [{"sku": "AB123", "qty": 2, "price": 9.99}, {"sku": "CD456", "qty": 1, "price": 24.5}],
         "status": "paid"},
        {"id": "ORD-7310", "items": [{"sku": "XY900", "qty": 3, "price": 4}], "status": "shipped"},
    ],
    "ticket": [
        {"title": "Login fails on Safari", "priority": "high", "tags": ["auth", "browser"]},
        {"title": "Export to CSV drops the last row", "priority": "medium", "tags": ["export"]},
    ],
    "event": [
        {"title": "Team offsite", "when": {"date": "2024-06-12", "time": "09:30"},
         "place": {"city": "Lisbon", "room": {"floor": 3, "name": "Atlantic"}},
         "attendees": [{"name": "Rui", "role": "host"}, {"name": "Mia", "role": "guest"}], "public": False},
    ],
    "review": [
        {"product": "Aeropress Go", "rating": 4, "verdict": "recommend", "pros": ["compact", "easy to clean"],
         "cons": ["small batch"], "verified": True},
    ],
}

TRAIN_SCHEMAS = {
    "book": obj({
        "title": S, "author": S, "year": {"type": "integer", "minimum": 0},
        "genre": {"enum": ["fiction", "history", "science", "poetry"]},
        "available": {"type": "boolean", "default": True},
    }),
    "weather": obj({
        "city": S, "temp_c": NUM, "condition": {"enum": ["sunny", "cloudy", "rain", "snow"]},
        "wind": obj({"speed": NUM, "dir": S}, ["speed"]),
        "alerts": {"type": "array", "items": S, "default": []},
    }, ["city", "temp_c", "condition"]),
    "tasks": obj({
        "owner": S,
        "tasks": {"type": "array", "items": obj({
            "id": INT, "text": S, "done": {"type": "boolean", "default": False},
            "level": {"enum": ["low", "normal", "high"]},
        }, ["id", "text", "done"])},
    }),
    "movie": obj({
        "title": S, "rating": {"type": "number", "minimum": 0, "maximum": 10},
        "cast": {"type": "array", "items": obj({"actor": S, "role": S}, ["actor"])},
        "meta": obj({"studio": S, "runtime": obj({"minutes": INT}, [])}, []),
        "seen": BOOL,
    }, ["title"]),
    "contact": obj({
        "name": S, "phone": {"type": ["string", "null"], "default": None}, "email": S,
        "kind": {"enum": ["personal", "work"]}, "vip": {"type": "boolean", "default": False},
    }),
}

TRAIN_DOCS = {
    "book": [
        {"title": "The Dispossessed", "author": "Ursula K. Le Guin", "year": 1974, "genre": "fiction", "available": True},
        {"title": "SPQR", "author": "Mary Beard", "year": 2015, "genre": "history", "available": False},
    ],
    "weather": [
        {"city": "Oslo", "temp_c": -3.5, "condition": "snow", "wind": {"speed": 12.0, "dir": "NW"}, "alerts": ["ice"]},
        {"city": "Nairobi", "temp_c": 24, "condition": "sunny", "wind": {"speed": 5.5, "dir": "E"}, "alerts": []},
    ],
    "tasks": [
        {"owner": "kim", "tasks": [{"id": 1, "text": "write tests", "done": True, "level": "high"},
                                   {"id": 2, "text": "fix docs", "done": False, "level": "low"}]},
    ],
    "movie": [
        {"title": "Arrival", "rating": 7.9, "cast": [{"actor": "Amy Adams", "role": "Louise"}],
         "meta": {"studio": "Paramount", "runtime": {"minutes": 116}}, "seen": True},
    ],
    "contact": [
        {"name": "Grace Hopper", "phone": None, "email": "grace@navy.mil", "kind": "work", "vip": True},
        {"name": "Linus", "phone": "+1 555 0100", "email": "linus@example.org", "kind": "personal", "vip": False},
    ],
}


# --------------------------------------------------------------------------------------------
# Mistakes
# --------------------------------------------------------------------------------------------

PROSE_BEFORE = ["Sure! Here is the JSON: ", "Here you go:\n", "Of course. The result is:\n\n", "Output:\n",
                "I extracted the following data from the text.\n", "Answer: ", "```\n", "Here's the object you asked for:\n"]
PROSE_AFTER = ["\nLet me know if you need anything else!", "\n\nHope this helps.", " Done.",
               "\nNote: some fields were inferred.", "\n\nIs there anything else I can help with?"]


def compact(v) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def spaced(v) -> str:
    return json.dumps(v, ensure_ascii=False)


def pretty(v) -> str:
    return json.dumps(v, indent=2, ensure_ascii=False)


def python_repr(v) -> str:
    return repr(v)


def fmt(v, rng: random.Random) -> str:
    return rng.choice([compact, spaced, pretty])(v)


def paths(v, prefix=()):
    """(path, leaf value) of every scalar in v."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, prefix + (i,))
    else:
        yield prefix, v


def enum_fields(schema: dict, prefix=()):
    """Paths (with "*" for array items) of the enum fields of a schema."""
    if "enum" in schema:
        yield prefix
    for k, s in schema.get("properties", {}).items():
        yield from enum_fields(s, prefix + (k,))
    if "items" in schema:
        yield from enum_fields(schema["items"], prefix + ("*",))


def close(prefix: str) -> str | None:
    """The truncated compact JSON `prefix` closed the way a reader would: an open string is
    closed, a partial literal completed, a dangling key or comma dropped, brackets closed. None
    when the cut leaves nothing sensible (inside a key, an escape, or a number's fraction)."""
    stack, in_str, i = [], False, 0
    while i < len(prefix):
        c = prefix[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            stack.append(c)
        elif c in "}]":
            stack.pop()
        i += 1
    text = prefix
    if in_str:
        if text.endswith('"'):
            return None  # nothing of the string yet: whether it was meant to be "" is a guess
        # Inside a key (object, and the string is not after ':')? Drop the member.
        j = text.rfind('"')
        before = text[:j].rstrip()
        if stack and stack[-1] == "{" and before[-1:] in "{,":
            text = before
        else:
            text += '"'
    else:
        for lit in ("true", "false", "null"):
            for n in range(1, len(lit)):
                if text.endswith(lit[:n]) and text[-n - 1:-n] in (":", ",", "["):
                    text += lit[n:]
        if text.endswith((".", "-", "e", "E")) and not text.endswith(("true", "false")):
            return None
    text = text.rstrip()
    if text.endswith(":"):  # a key without a value: drop the member
        text = text[:text.rfind('"', 0, text.rfind('"'))].rstrip()
    if text.endswith(","):
        text = text[:-1]
    closers = "".join("}" if b == "{" else "]" for b in reversed(stack))
    try:
        return json.dumps(json.loads(text + closers))
    except ValueError:
        return None


def valid(v, schema) -> bool:
    try:
        import jsonschema
    except ImportError:  # generation needs jsonschema; loading does not
        raise SystemExit("bench/repair_corpus.py needs jsonschema to generate the corpora")
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(v)


def mistakes(doc: dict, schema: dict, rng: random.Random, escapes: int = 1) -> list[tuple[str, str, object]]:
    """(family, broken text, intended value) for every family that applies to `doc`."""
    out = []
    c = compact(doc)
    add = lambda fam, text, want=doc: out.append((fam, text, want))  # noqa: E731
    add("prose_before", rng.choice(PROSE_BEFORE) + fmt(doc, rng))
    add("prose_after", fmt(doc, rng) + rng.choice(PROSE_AFTER))
    add("prose_both", rng.choice(PROSE_BEFORE) + fmt(doc, rng) + rng.choice(PROSE_AFTER))
    add("code_fence", "```json\n" + fmt(doc, rng) + "\n```")
    add("code_fence_prose", rng.choice(PROSE_BEFORE) + "```json\n" + pretty(doc) + "\n```" + rng.choice(PROSE_AFTER))
    # Two JSON values: a draft that misses fields, then the full answer; or the answer, then an
    # unrelated example.
    keys = list(doc)
    draft = {k: doc[k] for k in keys[: max(1, len(keys) // 2)]}
    add("two_values", compact(draft) + rng.choice(["\n\nCorrected:\n", "\nWait, here is the full object: ", "\n"]) + c)
    add("two_values", c + rng.choice(["\nExample of an error: ", "\n\n"]) + compact({"error": "none", "ok": True}))
    add("python_repr", python_repr(doc))
    if "'" not in c:
        add("single_quotes", c.replace('"', "'"))
    py = spaced(doc)
    if "true" in py or "false" in py or "null" in py:
        add("python_literals", py.replace("true", "True").replace("false", "False").replace("null", "None"))
    # Comments.
    k0 = keys[0]
    add("comment", c.replace(f'"{k0}"', f'// {k0} first\n"{k0}"', 1))
    lines = pretty(doc).split("\n")
    at = rng.randrange(1, len(lines) - 1)
    lines[at] += rng.choice(["  // from the text", "  # guessed", " /* check */"])
    add("comment", "\n".join(lines))
    # Trailing commas.
    add("trailing_comma", c[:-1] + ",}")
    if "]" in c:
        j = c.index("]")
        add("trailing_comma", c[:j] + "," + c[j:])
    add("trailing_comma", pretty(doc).replace("\n}", ",\n}"))
    # Syntax slips.
    j = c.index(',"')
    add("missing_comma", c[:j] + " " + c[j + 1:])
    add("missing_brace", c[:-1])
    k1 = keys[1 % len(keys)]
    add("unquoted_keys", "{" + ", ".join(f"{k}: {spaced(v)}" for k, v in doc.items()) + "}")
    add("missing_quote", c.replace(f'"{k1}"', f'{k1}"', 1))
    strs = [(p, v) for p, v in paths(doc) if isinstance(v, str) and len(v) > 2]
    if strs:
        p, v = rng.choice(strs)
        add("missing_quote", c.replace(f'"{v}"', f'"{v}', 1))
    # Wrong enum case, numbers as strings.
    for p in enum_fields(schema):
        vals = [v for q, v in paths(doc) if len(q) == len(p) and all(a == "*" or a == b for a, b in zip(p, q))]
        for v in vals[:1]:
            wrong = rng.choice([v.upper(), v.title()])
            add("enum_case", c.replace(f'"{v}"', f'"{wrong}"', 1))
    nums = [(p, v) for p, v in paths(doc) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if nums:
        p, v = rng.choice(nums)
        add("number_as_string", c.replace(f'"{p[-1]}":{compact(v)}', f'"{p[-1]}":"{compact(v)}"', 1))
    # Strings LLMs forget to escape: the first string if it has a space (`escapes` = 1, the
    # test corpus), or the first `escapes` strings with a space (the training corpus, whose
    # documents have fewer such strings).
    spaced_strs = [(p, v) for p, v in strs if " " in v]
    for p, v in spaced_strs[:escapes] if spaced_strs[:1] == strs[:1] or escapes > 1 else []:
        quoted = v.replace(" ", ' "', 1) + '"'
        want = json.loads(c.replace(f'"{v}"', json.dumps(quoted), 1))
        add("unescaped_quote", c.replace(f'"{v}"', f'"{quoted}"', 1), want)
        broken = v.replace(" ", "\n", 1)
        want = json.loads(c.replace(f'"{v}"', json.dumps(broken), 1))
        add("raw_newline", c.replace(f'"{v}"', f'"{broken}"', 1), want)
    # Missing required fields that have a default: the intended value fills in the default.
    for k, s in schema["properties"].items():
        if "default" in s and k in doc and k in schema.get("required", []):
            rest = {x: y for x, y in doc.items() if x != k}
            want = dict(doc, **{k: s["default"]})
            add("missing_field", compact(rest), want)
    # An extra field the schema does not allow.
    add("extra_field", c[:-1] + ',"confidence":0.9}')
    # Truncation: every cut at which a reader can still say what was meant.
    cuts = [n for n in range(2, len(c) - 1)]
    rng.shuffle(cuts)
    seen = set()
    for n in cuts:
        fixed = close(c[:n])
        if fixed is None or fixed in seen:
            continue
        want = json.loads(fixed)
        if not valid(want, schema):
            continue
        seen.add(fixed)
        add("truncated", c[:n], want)
    return out


def build(schemas: dict, docs: dict, seed: int, per_family: dict[str, int], escapes: int = 1) -> list[dict]:
    rng = random.Random(seed)
    pool: dict[str, list[tuple[str, str, object]]] = {}
    for name, ds in docs.items():
        for i, doc in enumerate(ds):
            assert valid(doc, schemas[name]), (name, doc)
            for fam, text, want in mistakes(doc, schemas[name], rng, escapes):
                pool.setdefault(fam, []).append((f"{name}{i}", text, want))
    cases = []
    for fam, items in sorted(pool.items()):
        # Round robin over the documents, so no one document fills a family.
        by_doc: dict[str, list] = {}
        for it in items:
            by_doc.setdefault(it[0], []).append(it)
        for lst in by_doc.values():
            rng.shuffle(lst)
        spread = [lst[k] for k in range(max(map(len, by_doc.values()))) for lst in by_doc.values() if k < len(lst)]
        chosen = sorted(spread[: per_family.get(fam, 6)], key=lambda t: t[0])
        for k, (where, text, want) in enumerate(chosen):
            schema = where.rstrip("0123456789")
            assert valid(want, schemas[schema]), (fam, where, want)
            cases.append({"name": f"{fam}/{where}/{k}", "family": fam, "schema": schema, "text": text,
                          "intended": want})
    return cases


TEST_COUNTS = {"truncated": 28, "two_values": 10, "comment": 10, "trailing_comma": 12, "missing_quote": 10,
               "missing_field": 6, "enum_case": 8, "prose_both": 8, "prose_before": 8, "prose_after": 8,
               "code_fence": 8, "code_fence_prose": 8, "python_repr": 8, "single_quotes": 8,
               "python_literals": 6, "missing_comma": 8, "unquoted_keys": 6, "number_as_string": 8,
               "unescaped_quote": 6, "raw_newline": 6, "missing_brace": 6, "extra_field": 6}


def main() -> int:
    DATA.mkdir(exist_ok=True)
    test = build(TEST_SCHEMAS, TEST_DOCS, seed=18, per_family=TEST_COUNTS)
    train = build(TRAIN_SCHEMAS, TRAIN_DOCS, seed=2024, per_family=TEST_COUNTS, escapes=3)
    test_texts = {c["text"] for c in test}
    train = [c for c in train if c["text"] not in test_texts]
    for name, schemas, cases in (("test", TEST_SCHEMAS, test), ("train", TRAIN_SCHEMAS, train)):
        path = DATA / f"repair_{name}.json"
        body = {"schemas": schemas, "cases": cases}
        path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
        fams = {}
        for c in cases:
            fams[c["family"]] = fams.get(c["family"], 0) + 1
        print(f"{path.name}: {len(cases)} cases, {path.stat().st_size // 1024} KB: {fams}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
