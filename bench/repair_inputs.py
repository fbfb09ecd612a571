"""The inputs of bench/repair_bench.py: grammars, generators of valid texts of a given length,
and the errors injected into them."""

from __future__ import annotations

import json
import random
import string

from bench import repair_corpus
from bench.corpus import INVOICE, IPV4_LOOSE as IPV4, RECORDS, TAGS, TAX_RATES

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _fill(target: int, head: str, tail: str, piece, sep: str = ",") -> str:
    """head + piece(0) sep piece(1) ... + tail, with as many pieces as keep it near `target`
    bytes (at least one)."""
    parts = [piece(0)]
    size = len(head) + len(tail) + len(parts[0])
    while size + len(sep) + len(piece(len(parts))) <= target:
        parts.append(piece(len(parts)))
        size += len(sep) + len(parts[-1])
    return head + sep.join(parts) + tail


def gen_record(rng: random.Random, i: int) -> str:
    name = rng.choice(WORDS).title() + " " + rng.choice(WORDS).title()
    return _dumps({
        "id": i, "name": name, "email": f"{rng.choice(WORDS)}{i}@example.com",
        "score": round(rng.uniform(0, 100), 2), "tags": rng.sample(TAGS, rng.randint(0, 3)),
        "active": rng.random() < 0.5,
    })


def gen_records(rng: random.Random, target: int) -> str:
    pieces: dict[int, str] = {}

    def piece(i):
        if i not in pieces:
            pieces[i] = gen_record(rng, i)
        return pieces[i]

    return _fill(target, '{"records":[', "]}", piece)


def gen_order(rng: random.Random, target: int) -> str:
    pieces: dict[int, str] = {}

    def piece(i):
        if i not in pieces:
            pieces[i] = _dumps({"sku": "".join(rng.choices(string.ascii_uppercase, k=2)) + f"{rng.randint(0, 999):03d}",
                                "qty": rng.randint(1, 9), "price": round(rng.uniform(1, 99), 2)})
        return pieces[i]

    return _fill(target, '{"id":"ORD-0042","items":[', '],"status":"paid"}', piece)


def gen_invoice(rng: random.Random, target: int) -> str:
    head = ('{"id":"3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b","issued":"2024-05-01T09:30:00Z","due":"2024-05-31",'
            '"customer":{"name":"Ada Lovelace","email":"ada@example.com","address":{"street":"12 Analytical Way",'
            '"city":"London","zip":"12345","country":"GB"}},"currency":"GBP","lines":[')
    tail = '],"notes":null,"paid":false}'
    pieces: dict[int, str] = {}

    def piece(i):
        if i not in pieces:
            pieces[i] = _dumps({
                "sku": "".join(rng.choices(string.ascii_uppercase, k=3)) + f"-{rng.randint(0, 99999):05d}",
                "description": " ".join(rng.sample(WORDS, 3)), "qty": rng.randint(1, 50),
                "unit_price": round(rng.uniform(1, 500), 2), "tax_rate": rng.choice(TAX_RATES),
                "discount": rng.choice([None, 0.1, 5]),
            })
        return pieces[i]

    return _fill(target, head, tail, piece)


def gen_words(rng: random.Random, target: int) -> str:
    return _fill(target - 1, rng.choice(WORDS).title(), ".", lambda i: rng.choice(WORDS), sep=" ")


def gen_csv(rng: random.Random, target: int) -> str:
    return _fill(target, "", "\n", lambda i: f"{rng.randint(0, 999999)},{rng.choice(WORDS)},{rng.choice(['true', 'false'])}",
                 sep="\n")


def gen_ips(rng: random.Random, target: int) -> str:
    return _fill(target, "", "", lambda i: ".".join(str(rng.randint(0, 255)) for _ in range(4)), sep=" ")


# name -> (kind, spec, generator of valid texts of about n bytes)
GRAMMARS = {
    "regex: sentence": ("regex", r"[A-Z][a-z]*( [a-z]+)*\.", gen_words),
    "regex: IPv4 list": ("regex", rf"{IPV4}( {IPV4})*", gen_ips),
    "regex: CSV rows": ("regex", r"([0-9]{1,6},[a-z]{1,12},(true|false)\n)+", gen_csv),
    "schema: order": ("schema", repair_corpus.TEST_SCHEMAS["order"], gen_order),
    "schema: records": ("schema", RECORDS, gen_records),
    "schema: invoice": ("schema", INVOICE, gen_invoice),
}

ERROR_CHARS = ",'\":{}[] aZ09"


def inject_errors(text: str, k: int, rng: random.Random, grammar) -> str:
    """`text` with `k` random one-byte errors (delete, insert or replace a byte by one of
    ERROR_CHARS: the quotes, commas and brackets LLMs get wrong, a letter, a digit) at distinct
    positions; retried until the grammar rejects the result."""
    for _ in range(100):
        chars = list(text)
        for pos in sorted(rng.sample(range(len(chars)), min(k, len(chars))), reverse=True):
            op = rng.choice(("delete", "insert", "replace"))
            if op == "delete":
                del chars[pos]
            elif op == "insert":
                chars.insert(pos, rng.choice(ERROR_CHARS))
            else:
                chars[pos] = rng.choice([c for c in ERROR_CHARS if c != chars[pos]])
        out = "".join(chars)
        if not grammar.validate(out).valid:
            return out
    raise RuntimeError("could not make an invalid text")


def garbage(n: int, rng: random.Random) -> str:
    return "".join(rng.choice(string.printable[:94]) for _ in range(n))


# --------------------------------------------------------------------------------------------
# Parts
# --------------------------------------------------------------------------------------------
