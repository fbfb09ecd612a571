"""Records Python jsonschema's verdicts on number texts, for the number-language tests.

Writes python_cases.json next to this file: for each schema (number keywords only, or
`allOf`/`const`/`enum` of them) and dialect, texts near its bounds and multiples, random
texts and corner cases (`texts`, space-separated), and whether `jsonschema` accepts
`json.loads(text)` for each (`accepted`, a "1" or "0" per text). Also the
numeric cases of the official JSON Schema Test Suite shipped in jsonschema's sdist, when its
`json/tests` directory is given as the first argument.

Run: python3 gen_python_cases.py [path/to/jsonschema-X/json/tests]
"""

import json
import random
import sys
from decimal import Decimal
from math import nextafter
from pathlib import Path

from importlib.metadata import version

from jsonschema import Draft4Validator, Draft202012Validator

VALIDATORS = {"draft4": Draft4Validator, "draft2020-12": Draft202012Validator}

SCHEMAS: list[tuple[str, str]] = [
    ("draft2020-12", '{"type": "integer", "minimum": 0, "maximum": 100}'),
    ("draft2020-12", '{"minimum": 0.5, "maximum": 99.5}'),
    ("draft2020-12", '{"exclusiveMinimum": 0.1, "exclusiveMaximum": 0.3}'),
    ("draft2020-12", '{"minimum": -0.3, "maximum": 0.7}'),
    ("draft2020-12", '{"maximum": 0.1}'),
    ("draft2020-12", '{"minimum": 1e-3}'),
    ("draft2020-12", '{"maximum": 9007199254740993}'),
    ("draft2020-12", '{"minimum": -1.7976931348623157e308, "exclusiveMaximum": 123456789012345.6}'),
    ("draft2020-12", '{"maximum": 999999999999999.9}'),
    ("draft2020-12", '{"type": "integer", "exclusiveMinimum": -5.5, "maximum": 1e2}'),
    ("draft2020-12", '{"type": "integer", "multipleOf": 7}'),
    ("draft2020-12", '{"multipleOf": 7, "minimum": -100, "maximum": 100}'),
    ("draft2020-12", '{"multipleOf": 0.01}'),
    ("draft2020-12", '{"multipleOf": 0.01, "minimum": 0, "maximum": 1000}'),
    ("draft2020-12", '{"multipleOf": 0.1, "minimum": -10}'),
    ("draft2020-12", '{"multipleOf": 0.5}'),
    ("draft2020-12", '{"multipleOf": 2.5, "maximum": 100}'),
    ("draft2020-12", '{"multipleOf": 1e-8}'),
    ("draft2020-12", '{"multipleOf": 0.3}'),
    ("draft2020-12", '{"multipleOf": 2.0}'),
    ("draft2020-12", '{"multipleOf": 1000}'),
    ("draft2020-12", '{"multipleOf": 0.0001, "minimum": 0, "maximum": 1}'),
    ("draft2020-12", '{"type": "integer", "multipleOf": 0.01}'),
    ("draft4", '{"type": "integer", "multipleOf": 0.5}'),
    ("draft4", '{"type": "integer"}'),
    ("draft2020-12", '{"type": "integer"}'),
    ("draft2020-12", '{"type": "number"}'),
    ("draft4", '{"minimum": 1, "exclusiveMinimum": true, "maximum": 2, "exclusiveMaximum": true}'),
    ("draft4", '{"type": "integer", "minimum": -2.5, "maximum": 2.5, "exclusiveMaximum": true}'),
    ("draft2020-12", '{"type": "integer", "minimum": 0.5, "exclusiveMaximum": 10.5}'),
    ("draft2020-12", '{"maximum": 1e400}'),
    ("draft2020-12", '{"exclusiveMinimum": 1e-400}'),
    ("draft2020-12", '{"minimum": 0.1, "maximum": 0.1}'),
    ("draft2020-12", '{"allOf": [{"multipleOf": 4}, {"multipleOf": 6}, {"minimum": -50, "maximum": 50}]}'),
    ("draft2020-12", '{"allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.3}]}'),
    ("draft2020-12", '{"allOf": [{"type": "integer"}, {"multipleOf": 0.25}, {"exclusiveMaximum": 1000}]}'),
    ("draft2020-12", '{"const": 0.1}'),
    ("draft2020-12", '{"const": 1}'),
    ("draft2020-12", '{"const": 1e2}'),
    ("draft2020-12", '{"const": -0.0}'),
    ("draft2020-12", '{"enum": [1.5, 2, 0.30000000000000004, 123456789012345678]}'),
    ("draft2020-12", '{"minimum": 0}'),
    ("draft2020-12", '{"exclusiveMinimum": 0, "maximum": 1e-5}'),
    ("draft2020-12", '{"minimum": 2.5e3, "exclusiveMaximum": 1e20}'),
    ("draft2020-12", '{"type": "integer", "minimum": -1e5, "maximum": 1.5e6}'),
    ("draft2020-12", '{"type": "integer", "minimum": 12345678901234567890}'),
    ("draft2020-12", '{"maximum": -1e-300}'),
    ("draft2020-12", '{"minimum": 1e300}'),
    ("draft2020-12", '{"exclusiveMaximum": 1.7976931348623157e308}'),
    ("draft4", '{"type": "integer", "maximum": 1e3}'),
    ("draft2020-12", '{"multipleOf": 5, "minimum": 0}'),
    ("draft2020-12", '{"const": 1e23}'),
    ("draft2020-12", '{"const": 99999999999999991611392}'),
    ("draft2020-12", '{"const": 100000000000000000000000}'),
    ("draft2020-12", '{"const": -2.0}'),
    ("draft2020-12", '{"enum": [1, 2.5e-7, 1e20, 12345678901234567890123]}'),
]

SUITE_FILES = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "type",
               "optional/bignum", "optional/float-overflow", "optional/zeroTerminatedFloats"]


def verdict(dialect: str, schema: dict, text: str) -> bool:
    """Whether jsonschema accepts the JSON text; a text Python cannot load or validate fails."""
    try:
        return VALIDATORS[dialect](schema).is_valid(json.loads(text))
    except (ValueError, OverflowError, ZeroDivisionError):
        return False


def spell(v: Decimal) -> str:
    """The exponent-free text of a decimal."""
    s = format(v, "f")
    return "0" if s in ("-0", "") else s


def numbers_of(schema) -> list[Decimal]:
    """Every number written in the schema."""
    out = []
    if isinstance(schema, dict):
        for v in schema.values():
            out += numbers_of(v)
    elif isinstance(schema, list):
        for v in schema:
            out += numbers_of(v)
    elif isinstance(schema, (int, float)) and not isinstance(schema, bool):
        out.append(Decimal(repr(schema)) if isinstance(schema, float) else Decimal(schema))
    return out


def exponent_texts(v: Decimal, rng: random.Random) -> set[str]:
    """Spellings of `v` with an exponent: the mantissa's point moved a few places either way,
    `e`/`E`, signs and leading zeros on the exponent."""
    out = set()
    if not v.is_finite():
        return out
    if v == 0:
        return {"0e0", "-0.0E+5", "0.000e-300", "0e301"}
    sign, digits, exp = v.normalize().as_tuple()
    body = "".join(map(str, digits))
    for m in range(-5, 5):
        # Mantissa with its first digit at 10^m: k = magnitude(v) - m.
        mag = len(body) - 1 + exp
        k = mag - m
        if m >= 0:
            ip = body[: m + 1].ljust(m + 1, "0")
            fp = body[m + 1:]
        else:
            ip, fp = "0", "0" * (-m - 1) + body
        mant = ("-" if sign else "") + ip + ("." + fp if fp else rng.choice(["", ".0"]))
        e = rng.choice(["e", "E"])
        ks = (f"+{k}" if k >= 0 and rng.random() < 0.5 else str(k))
        if rng.random() < 0.2:
            ks = ks.replace("-", "-00").replace("+", "+0") if ks[0] in "+-" else "0" + ks
        out.add(mant + e + ks)
    return out


def texts_for(schema: dict, rng: random.Random) -> list[str]:
    texts = {"0", "-0", "0.0", "-0.0", "1", "1.0", "1.00000000000000000000", "-1", "7", "14.0", "0.07",
             "0.06", "0.3", "0.1", "1e2", "1E-3", "100", "0.30000000000000004", "9007199254740993",
             "123456789012345", "1234567890123456", "0.000000000000001", "0.0000000000000001",
             "1e-06", "2.5E+3", "-1e-06", "1e+308", "1e308", "1e309", "1e-320", "1e300", "1e-300",
             "1.7976931348623157e+308", "12345678901234567890", "-12345678901234567890",
             "99999999999999991611392", "100000000000000000000000", "1e23", "1.0e23", "-2e0", "-20e-1",
             "1000e3", "0.0001e4", "1.5e-7", "15e-8", "2.5e-07", "1e20", "100000000000000000000",
             "1" + "0" * 40, "-1" + "0" * 40, "9" * 60, "1.000000000000001e2", "1.0000000000000001e2"}
    anchors = [n for n in numbers_of(schema) if abs(n) < Decimal(10) ** 17]
    for a in anchors:
        base = [a, -a]
        x = float(a)
        if x not in (float("inf"), float("-inf")):
            base += [Decimal(repr(nextafter(x, 1e400))), Decimal(repr(nextafter(x, -1e400)))]
        for b in base:
            for k in range(0, 18):
                step = Decimal(1).scaleb(-k)
                for d in (0, step, -step) + ((5 * step, -5 * step) if k % 3 == 0 else ()):
                    texts.add(spell(b + d))
            texts.add(spell(b) + ("0" * 6 if "." in spell(b) else ".000"))
            for m in range(-6, 7):
                texts.add(spell(b * m))
            for k in (0, 1, -1, 5, -5):
                texts |= exponent_texts(b.scaleb(k) if b else b, rng)
    for a in [n for n in numbers_of(schema)]:
        # Numbers of any size: the bound's own exponent forms and long integers near it.
        texts |= exponent_texts(a, rng)
        if abs(a) < Decimal(10) ** 400:
            i = int(a)
            for d in (-1, 0, 1):
                texts.add(str(i + d))
    for _ in range(60):
        sign = rng.choice(["", "-"])
        mant = rng.choice(["1", "2.5", "9.99", "12", "0.5", "0.05", "0.005", "123", "1234", "1.23456789012345",
                           "1.234567890123456", "0", "0.0", "7.000"])
        k = rng.choice([0, 1, -1, 2, -2, 5, -5, 7, -7, 15, 16, -16, 20, -20, 299, 300, 301, -300, -301, 308])
        texts.add(f"{sign}{mant}{rng.choice('eE')}{rng.choice(['', '+']) if k >= 0 else ''}{k}")
    for _ in range(120):
        sign = rng.choice(["", "-"])
        ilen = rng.choice([0, 1, 1, 2, 3, 5, 8, 15, 16])
        ip = "0" if ilen == 0 else str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(ilen - 1))
        flen = rng.choice([0, 0, 1, 2, 3, 8, 14, 16, 17])
        fp = "".join(rng.choice("0123456789") for _ in range(flen))
        texts.add(sign + ip + ("." + fp if fp else ""))
    for a in anchors:
        if a > 0 and "multipleOf" in json.dumps(schema):
            for _ in range(60):
                k = rng.choice([rng.randint(-40, 40), rng.randint(-10**6, 10**6), rng.randint(-10**12, 10**12)])
                texts.add(spell(a * k))
    return sorted(texts, key=lambda t: (len(t), t))


def suite_cases(root: Path) -> list[dict]:
    groups = []
    for dialect, folder in (("draft4", "draft4"), ("draft2020-12", "draft2020-12")):
        for name in SUITE_FILES:
            path = root / folder / f"{name}.json"
            if not path.exists():
                continue
            for group in json.loads(path.read_text()):
                schema = group["schema"]
                if not isinstance(schema, dict):
                    continue
                if "type" in schema and schema["type"] not in ("integer", "number"):
                    continue
                cases = []
                for test in group["tests"]:
                    data = test["data"]
                    if isinstance(data, bool) or not isinstance(data, (int, float)):
                        continue
                    text = json.dumps(data)
                    cases.append([text, verdict(dialect, schema, text), test["valid"]])
                if cases:
                    groups.append({"source": f"suite {folder}/{name}: {group['description']}",
                                   "dialect": dialect, "schema": schema, "cases": cases})
    return groups


def main() -> None:
    rng = random.Random(14)
    groups = []
    for dialect, text in SCHEMAS:
        schema = json.loads(text)
        texts = texts_for(schema, rng)
        # One string of texts and one of verdicts ("1": accepted) keep the file small.
        groups.append({"source": "generated", "dialect": dialect, "schema_text": text, "texts": " ".join(texts),
                       "accepted": "".join("1" if verdict(dialect, schema, t) else "0" for t in texts)})
    if len(sys.argv) > 1:
        groups += suite_cases(Path(sys.argv[1]))
    out = Path(__file__).with_name("python_cases.json")
    out.write_text(json.dumps({"jsonschema": version("jsonschema"), "groups": groups}, separators=(",", ":")))
    print(f"{sum(len(g['cases']) for g in groups)} cases in {len(groups)} groups -> {out}")


if __name__ == "__main__":
    main()
