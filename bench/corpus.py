"""The inputs the benches (and their tests) share: vocabularies, regexes, JSON Schemas, samples
and prompts. Plain data, no dependencies. The broken-JSON corpora of the repair tests and bench
are data (`bench/data/repair_*.json`, made and loaded by `bench/repair_corpus.py`).

`JSONSCHEMABENCH_DIR` names the real-world schema sets the schema bench reads (data kept
outside the repository).

The person and order records come in the variants the benches measure: `person_schema` and
`order_schema` build each variant from one definition, so a variant differs only where it says.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# --------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------

VOCABS = {  # name -> onyx asset (`python -m onyx.models.assets fetch ASSET`)
    "qwen2": "qwen2-tokenizer",     # 152,064 tokens, byte-level BPE (the grammar targets' scale)
    "smollm2": "smollm2",           # 49,152 tokens, byte-level BPE
    "gemma3": "gemma3-tokenizer",   # 262,144 tokens, SentencePiece with byte fallback
}

# --------------------------------------------------------------------------------------------
# Regexes
# --------------------------------------------------------------------------------------------

# The Onyx paper's two patterns, and an order ID.
YEAR = r"[0-9]{4}"
EMAIL = r"[a-z]+@[a-z]+\.com"
ORDER_ID = r"[A-Z]{3}-[0-9]{4}"

EMAIL_PATTERN = r"[a-z0-9._]+@[a-z0-9]+\.[a-z]{2,6}"  # a JSON Schema "pattern" for emails

OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"  # 0-255, no leading zeros
IPV4 = rf"({OCTET}\.){{3}}{OCTET}"
OCTET_LOOSE = r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])"  # 0-255, leading zeros allowed
IPV4_LOOSE = rf"{OCTET_LOOSE}(\.{OCTET_LOOSE}){{3}}"

# --------------------------------------------------------------------------------------------
# JSON Schemas
# --------------------------------------------------------------------------------------------


def _string(pattern: str | None = None) -> dict:
    return {"type": "string", "pattern": pattern} if pattern else {"type": "string"}


def _record(properties: dict, **extra) -> dict:
    """A closed object whose properties are all required (in order)."""
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False, **extra}


def person_schema(email_pattern: str | None = None) -> dict:
    """{name, age, email}, all required; the email a free string or one matching the pattern."""
    return _record({"name": {"type": "string"}, "age": {"type": "integer"}, "email": _string(email_pattern)})


def order_schema(*, id_pattern: str, email_pattern: str | None, max_items: int) -> dict:
    """{id, customer {name, email}, items [{sku, qty, price}] (1 to max_items)}."""
    item = _record({"sku": {"type": "string"}, "qty": {"type": "integer"}, "price": {"type": "number"}})
    return _record({
        "id": _string(id_pattern),
        "customer": _record({"name": {"type": "string"}, "email": _string(email_pattern)}),
        "items": {"type": "array", "items": item, "minItems": 1, "maxItems": max_items},
    })


# Grammar bench: emails constrained by EMAIL_PATTERN, up to five items.
PERSON_SCHEMA = person_schema(EMAIL_PATTERN)
ORDER_SCHEMA = order_schema(id_pattern=ORDER_ID, email_pattern=EMAIL_PATTERN, max_items=5)
# Speculative-decoding bench: what a model writes from a prompt (free emails, up to three items).
PERSON_SCHEMA_FREE = person_schema()
ORDER_SCHEMA_FREE = order_schema(id_pattern=f"^{ORDER_ID}$", email_pattern=None, max_items=3)

# A character sheet with a long free-text field (runtime bench: long constrained outputs).
CHARACTER_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "backstory": {"type": "string"},
        "skills": {"type": "array", "items": {"type": "string"}},
        "possessions": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age", "backstory", "skills", "possessions"],
}

TAGS = ["red", "green", "blue", "black"]

# An array of records (repair bench: documents of any length).
RECORDS = _record({
    "records": {"type": "array", "items": _record({
        "id": {"type": "integer", "minimum": 0},
        "name": {"type": "string", "maxLength": 32},
        "email": {"type": "string", "format": "email"},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"enum": TAGS}, "maxItems": 4},
        "active": {"type": "boolean"},
    })},
})

COUNTRIES = ["US", "CA", "MX", "GB", "DE", "FR", "IT", "ES", "NL", "BE", "SE", "NO", "DK", "FI", "PL", "CZ",
             "AT", "CH", "JP", "KR", "CN", "IN", "BR", "AR", "AU", "NZ", "ZA"]
TAX_RATES = [0, 7, 19, 20]

# An invoice: formats, nested objects, enums, nullable fields (~6,600 DFA states).
INVOICE = _record({
    "id": {"type": "string", "format": "uuid"},
    "issued": {"type": "string", "format": "date-time"},
    "due": {"type": "string", "format": "date"},
    "customer": _record({
        "name": {"type": "string", "minLength": 1, "maxLength": 60},
        "email": {"type": "string", "format": "email"},
        "address": _record({
            "street": {"type": "string", "maxLength": 80},
            "city": {"type": "string", "maxLength": 40},
            "zip": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$"},
            "country": {"enum": COUNTRIES},
        }),
    }),
    "currency": {"enum": ["USD", "EUR", "GBP", "JPY", "CHF"]},
    "lines": {"type": "array", "minItems": 1, "items": _record({
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{5}$"},
        "description": {"type": "string", "maxLength": 60},
        "qty": {"type": "integer", "minimum": 1, "maximum": 999},
        "unit_price": {"type": "number", "minimum": 0},
        "tax_rate": {"enum": TAX_RATES},
        "discount": {"type": ["number", "null"]},
    })},
    "notes": {"type": ["string", "null"], "maxLength": 200},
    "paid": {"type": "boolean"},
})

# Real-world schemas (schema bench): JSONSchemaBench (Geng et al. 2025), one gzipped JSON Lines
# file per set, `{"file", "schema"}` per line. It lives outside the repository, next to the
# checkouts (`../shared/data/jsonschemabench`), or where ONYX_JSONSCHEMABENCH points.
JSONSCHEMABENCH_DIR = Path(os.environ.get("ONYX_JSONSCHEMABENCH")
                           or Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench")
JSONSCHEMABENCH_SETS = ["Glaiveai2K", "Github_trivial", "Github_easy", "Github_medium", "Github_hard",
                        "Github_ultra", "Kubernetes", "Snowplow", "WashingtonPost", "JsonSchemaStore"]

# Recursive schemas (context-free: Onyx compiles them as pushdown grammars), shaped as Pydantic
# writes a self-referencing model ($defs, $ref, titles), closed so every engine reads the same
# language. A tree of nodes with children:
TREE_SCHEMA = {
    "$defs": {"Node": _record({
        "name": {"title": "Name", "type": "string"},
        "value": {"title": "Value", "type": "integer"},
        "children": {"title": "Children", "type": "array", "items": {"$ref": "#/$defs/Node"}},
    }, title="Node")},
    "$ref": "#/$defs/Node",
}

# A discussion thread: a title and an optional first comment, whose replies are comments.
THREAD_SCHEMA = _record({
    "title": {"title": "Title", "type": "string"},
    "first": {"anyOf": [{"$ref": "#/$defs/Comment"}, {"type": "null"}]},
}, title="Thread", **{"$defs": {"Comment": _record({
    "author": {"title": "Author", "type": "string"},
    "text": {"title": "Text", "type": "string"},
    "score": {"title": "Score", "type": "integer"},
    "replies": {"title": "Replies", "type": "array", "items": {"$ref": "#/$defs/Comment"}},
}, title="Comment")}})


def _tree_sample(depth: int) -> str:
    """A compact tree nesting `depth` nodes deep, with a leaf sibling at every level."""
    node = {"name": f"leaf-{depth}", "value": depth, "children": []}
    for d in range(depth - 1, 0, -1):
        sibling = {"name": f"n{d}b", "value": -d, "children": []}
        node = {"name": f"n{d}", "value": d * 10, "children": [node, sibling]}
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _thread_sample(depth: int) -> str:
    """A compact thread whose first comment has replies `depth` comments deep; the texts have
    escapes and non-ASCII letters."""
    reply: dict = {"author": "zoé", "text": "Agreed \"completely\".\nThe end.", "score": 0, "replies": []}
    for d in range(depth - 1, 0, -1):
        reply = {"author": f"user{d}", "text": f"Reply at depth {d}: café, naïve, 東京.", "score": d,
                 "replies": [reply]}
    return json.dumps({"title": "Is recursion fun?", "first": reply}, separators=(",", ":"),
                      ensure_ascii=False)


# llama.cpp's GBNF grammars (`grammars/` of the `llama-cpp-grammars` asset, fetched by
# `bench.peers.load_spec`): a pattern's spec is the file name. The samples follow each grammar's
# own whitespace rules (json.gbnf: optional " " or a newline and indentation after literals;
# c.gbnf: whitespace only where a rule names `ws`, required there).
GBNF_ASSET = "llama-cpp-grammars"

GBNF_JSON_SAMPLE = ('{"id": 7, "tags": ["a", "b\\n"], "tree": {"kids": [{"kids": [{"kids": [{"kids":\n'
                    '  [{"kids": [{"leaf": true, "x": -1.5e3, "s": "caf\\u00e9 \\"q\\""}]}]}]}]}]}, '
                    '"none": null}')

GBNF_C_SAMPLE = (
    "int main(int n){int s = 0;"
    "for(int i = 0; i<n; i = i+1){"
    "while(s<1000){"
    "if(s<500){"
    "if(s<100){"
    "while(s<50){"
    "if(s!=7){s = s+( 2*i )-1;}else{s = s*2;}"
    "}"
    "}"
    "//grow\n"
    "s = s+(\ti\t);"
    "}"
    "/* the outer loop */"
    "s = add(s, 3);"
    "}"
    "}"
    "return -s;}"
    "float half(float x){return x/2;}"
)

# --------------------------------------------------------------------------------------------
# Patterns with a valid sample (grammar bench)
# --------------------------------------------------------------------------------------------

# (name, kind, spec, a valid sample). JSON samples are compact: every engine is configured for
# compact output (no whitespace between tokens, "," and ":" separators).
GRAMMAR_PATTERNS = [
    ("digits4", "regex", YEAR, "2024"),
    ("email", "regex", EMAIL, "jane@example.com"),
    ("code", "regex", ORDER_ID, "ABC-1234"),
    ("ipv4", "regex", IPV4, "192.168.10.254"),
    ("person", "schema", PERSON_SCHEMA,
     '{"name":"Jane Doe","age":42,"email":"jane.doe@example.com"}'),
    ("order", "schema", ORDER_SCHEMA,
     '{"id":"ABC-1234","customer":{"name":"Jane Doe","email":"jane@example.com"},'
     '"items":[{"sku":"SKU-001","qty":2,"price":9.99},{"sku":"SKU-042","qty":1,"price":120.5}]}'),
    ("tree", "schema", TREE_SCHEMA, _tree_sample(7)),
    ("thread", "schema", THREAD_SCHEMA, _thread_sample(7)),
    ("gbnf_json", "gbnf", "json.gbnf", GBNF_JSON_SAMPLE),
    ("gbnf_c", "gbnf", "c.gbnf", GBNF_C_SAMPLE),
]

# The context-free patterns above (recursion without a depth limit): besides the sample walk,
# the grammar bench replays seeded random walks through them and gives them a table of their own.
PUSHDOWN_PATTERNS = ("tree", "thread", "gbnf_json", "gbnf_c")

# --------------------------------------------------------------------------------------------
# Prompts (runtime bench)
# --------------------------------------------------------------------------------------------

STORY = ("Write a long, detailed story about a dragon who learns to cook. Describe every dish, "
         "every ingredient and every guest at the feast in detail.")
JSON_ASK = ("Describe a fantasy character as JSON: name, age, a long backstory, a list of five skills "
            "and a list of five possessions.")

# A long system prompt shared by several requests (prefix caching), and questions to ask after it.
SYSTEM_PROMPT = (
    "You are Onyx Assistant, a careful and friendly helper for the staff of a large public library. "
    "You answer questions about opening hours, borrowing rules, fines, room bookings, events, the "
    "digital catalogue, inter-library loans, accessibility services and volunteering. Always be "
    "polite and concise. If you do not know an answer, say so and suggest asking at the front desk. "
    "Borrowing rules: adults may borrow up to twenty items at a time; children up to ten; DVDs are "
    "lent for one week, books for three weeks, magazines for one week. Items may be renewed twice "
    "unless another member has reserved them. Fines are twenty cents per day per item, capped at "
    "five dollars per item; children's items have no fines. Lost items are charged at replacement "
    "cost plus a processing fee of three dollars. Room bookings: the study rooms seat four people "
    "and may be booked for two hours per day; the meeting hall seats sixty and must be booked a week "
    "in advance through the events office. Opening hours: Monday to Thursday nine to eight, Friday "
    "nine to six, Saturday ten to five, closed on Sundays and public holidays. The digital catalogue "
    "is available online at all times; members sign in with their card number and a four digit PIN. "
    "Inter-library loans take about ten working days and cost two dollars each. Accessibility: the "
    "building has step-free access, a hearing loop at the front desk, large-print books on the "
    "ground floor and screen-reader software on every public computer. Volunteers help with the "
    "homework club, the reading circle for older readers and the summer reading challenge; they "
    "must be over sixteen and attend one induction session. Events this month include a local "
    "history talk, a coding club for teenagers, a knitting circle and a storytime for toddlers "
    "every Wednesday morning. Never share personal details of members. Never promise exceptions "
    "to the rules; refer such requests to the duty manager. When asked about anything unrelated "
    "to the library, answer briefly and steer the conversation back to library services."
)
QUESTIONS = ["How many books can my daughter borrow?", "Are you open on Sunday?",
             "How much is the fine for a late DVD?", "Can I book the meeting hall tomorrow?"]

# --------------------------------------------------------------------------------------------
# Chat prompts with a schema (whitespace bench)
# --------------------------------------------------------------------------------------------


def _enum(*values) -> dict:
    return {"enum": list(values)}


def _strings(**bounds) -> dict:
    return {"type": "array", "items": {"type": "string"}, **bounds}


_INT = {"type": "integer"}
_NUM = {"type": "number"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}

# (key, user message, schema): what a user asks a chat model for, flat records and nested ones,
# with arrays, enums, numbers and booleans. The message names the fields in words (the schema
# itself is not shown to the model), as a request with `response_format` usually does.
JSON_TASKS: list[tuple[str, str, dict]] = [
    ("person", "Give a person record as JSON: Alice Johnson, 34 years old, email alice.johnson@example.com.",
     PERSON_SCHEMA_FREE),
    ("order", "Write an order as JSON: order ID ORD-1042 for customer Jane Doe (jane@shop.com), who bought "
              "2 notebooks (SKU NB-01) at 3.50 each and 1 pen (SKU PN-07) at 1.25.", ORDER_SCHEMA_FREE),
    ("character", JSON_ASK, CHARACTER_SCHEMA),
    ("members", "List three library members as JSON records with an id, a name, an email, a score, a list of "
                "tags (red, green, blue or black) and whether they are active.", RECORDS),
    ("weather", "Report today's weather in Lisbon as JSON: the city, the temperature in Celsius, the condition "
                "(sunny, cloudy, rain or snow) and the humidity in percent.",
     _record({"city": _STR, "temperature_c": _NUM, "condition": _enum("sunny", "cloudy", "rain", "snow"),
              "humidity": {"type": "integer", "minimum": 0, "maximum": 100}})),
    ("book", "Describe the novel Dune as JSON: title, author, year of publication, a list of genres, and "
             "whether it is available in the library.",
     _record({"title": _STR, "author": _STR, "year": _INT, "genres": _strings(), "available": _BOOL})),
    ("movie", "Give the film Casablanca as JSON with its title, director, release year, a rating out of 10 "
              "and up to five cast members.",
     _record({"title": _STR, "director": _STR, "year": _INT,
              "rating": {"type": "number", "minimum": 0, "maximum": 10}, "cast": _strings(maxItems=5)})),
    ("recipe", "Write a recipe for pancakes as JSON: its name, the number of servings, the ingredients (each "
               "with an item and an amount) and the steps.",
     _record({"name": _STR, "servings": _INT,
              "ingredients": {"type": "array", "items": _record({"item": _STR, "amount": _STR})},
              "steps": _strings()})),
    ("event", "Announce a jazz concert in Paris on 2025-06-21 for 300 attendees, as JSON with the event's "
              "name, date, location (city and country) and the number of attendees.",
     _record({"name": _STR, "date": {"type": "string", "format": "date"},
              "location": _record({"city": _STR, "country": _STR}), "attendees": _INT})),
    ("product", "Describe a wireless mouse for sale as JSON: name, price, currency (USD, EUR or GBP), whether "
                "it is in stock, and a few tags.",
     _record({"name": _STR, "price": _NUM, "currency": _enum("USD", "EUR", "GBP"), "in_stock": _BOOL,
              "tags": _strings()})),
    ("address", "Write the address of the Eiffel Tower as JSON with street, city, postal code and country.",
     _record({"street": _STR, "city": _STR, "postal_code": _STR, "country": _STR})),
    ("todo", "Make a to-do list for moving house as JSON: a list of items, each with a task, whether it is "
             "done, and a priority (low, medium or high).",
     _record({"items": {"type": "array", "items": _record(
         {"task": _STR, "done": _BOOL, "priority": _enum("low", "medium", "high")}), "minItems": 1}})),
    ("sentiment", "Classify the sentiment of this review as JSON with the text, the sentiment (positive, "
                  "negative or neutral) and a confidence between 0 and 1: 'The food was cold and the "
                  "waiter ignored us.'",
     _record({"text": _STR, "sentiment": _enum("positive", "negative", "neutral"),
              "confidence": {"type": "number", "minimum": 0, "maximum": 1}})),
    ("tool_args", "Call get_weather for Tokyo in celsius. Reply with the function's arguments as JSON: the "
                  "location and the unit (celsius or fahrenheit).",
     _record({"location": _STR, "unit": _enum("celsius", "fahrenheit")})),
    ("flight", "Book a flight from Boston to Denver on 2025-03-14 for two passengers in economy. Give the "
               "booking as JSON: from, to, date, passengers and class (economy, business or first).",
     _record({"from": _STR, "to": _STR, "date": {"type": "string", "format": "date"}, "passengers": _INT,
              "class": _enum("economy", "business", "first")})),
    ("employee", "Describe an employee as JSON: Sam Lee, a data engineer in the analytics department, whose "
                 "manager is Rita Moreno (rita@corp.com), with a list of skills.",
     _record({"name": _STR, "title": _STR, "department": _STR,
              "manager": _record({"name": _STR, "email": _STR}), "skills": _strings()})),
    ("company", "Describe the company Nintendo as JSON: name, year founded, headquarters (city and country), "
                "number of employees, and a list of products.",
     _record({"name": _STR, "founded": _INT, "headquarters": _record({"city": _STR, "country": _STR}),
              "employees": _INT, "products": _strings()})),
    ("ticket", "Label this support ticket as JSON with a label (billing, technical or account) and a list of "
               "reasons: 'I was charged twice for my subscription this month.'",
     _record({"label": _enum("billing", "technical", "account"), "reasons": _strings(minItems=1)})),
    ("calendar", "Plan a Monday as JSON: a list of events, each with a title, a start time and an end time.",
     _record({"events": {"type": "array", "items": _record({"title": _STR, "start": _STR, "end": _STR}),
                         "minItems": 1}})),
    ("country", "Give facts about Japan as JSON: name, capital, population, a list of languages and the "
                "continent (Africa, Asia, Europe, Americas or Oceania).",
     _record({"name": _STR, "capital": _STR, "population": _INT, "languages": _strings(),
              "continent": _enum("Africa", "Asia", "Europe", "Americas", "Oceania")})),
    ("quiz", "Write a multiple-choice question about the solar system as JSON: the question, four options and "
             "the index of the right answer.",
     _record({"question": _STR, "options": _strings(minItems=4, maxItems=4),
              "answer_index": {"type": "integer", "minimum": 0, "maximum": 3}})),
    ("song", "Describe the song Bohemian Rhapsody as JSON: title, artist, album, duration in seconds, and "
             "whether it is explicit.",
     _record({"title": _STR, "artist": _STR, "album": _STR, "duration_seconds": _INT, "explicit": _BOOL})),
    ("review", "Review a pizza restaurant as JSON: its name, a rating from 1 to 5, lists of pros and cons, and "
               "whether you would return.",
     _record({"restaurant": _STR, "rating": {"type": "integer", "minimum": 1, "maximum": 5}, "pros": _strings(),
              "cons": _strings(), "would_return": _BOOL})),
    ("bug", "File a bug report as JSON: the login button does nothing on Safari. Give a title, a severity "
            "(low, medium, high or critical), the steps to reproduce, the expected and the actual result.",
     _record({"title": _STR, "severity": _enum("low", "medium", "high", "critical"),
              "steps_to_reproduce": _strings(), "expected": _STR, "actual": _STR})),
    ("planet", "Describe Saturn as JSON: name, number of moons, distance from the Sun in kilometres, and "
               "whether it has rings.",
     _record({"name": _STR, "moons": _INT, "distance_from_sun_km": _NUM, "has_rings": _BOOL})),
    ("profile", "Create a user profile as JSON for the username nightowl: settings with a theme (light or "
                "dark), whether notifications are on, and a language.",
     _record({"username": _STR, "settings": _record({"theme": _enum("light", "dark"), "notifications": _BOOL,
                                                     "language": _STR})})),
    ("shopping", "Write a shopping list for a picnic as JSON: the store, and the items, each with a name and "
                 "a quantity.",
     _record({"store": _STR, "items": {"type": "array", "items": _record({"name": _STR, "quantity": _INT}),
                                       "minItems": 1}})),
    ("math", "Solve 12 * 7 + 5 and answer as JSON: the problem, the steps, and the numeric answer.",
     _record({"problem": _STR, "steps": _strings(), "answer": _NUM})),
    ("meeting", "Extract the meeting from this email as JSON (date, time, participants, topic): 'Hi all, "
                "let's meet on Thursday at 3pm with Ana, Ben and Chloe to go over the Q3 budget.'",
     _record({"date": _STR, "time": _STR, "participants": _strings(), "topic": _STR})),
    ("inventory", "Give a warehouse inventory as JSON: the warehouse name and a list of products, each with a "
                  "SKU, a name, a quantity and a unit price.",
     _record({"warehouse": _STR, "products": {"type": "array", "items": _record(
         {"sku": _STR, "name": _STR, "quantity": _INT, "unit_price": _NUM}), "minItems": 1}})),
]
