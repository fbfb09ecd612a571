"""Lark grammars: real-world grammars (JSON, arithmetic with `%ignore`, a CSV-like format, an
apply_patch-style diff, a SQL-like SELECT) compile on real vocabularies; texts walked at random
through the token masks parse with the `lark` package itself on the very same grammar text
(Earley with the dynamic lexer, the reading the front end follows); mutations of those texts are
judged as lark judges them; `%json` embeds a JSON Schema; bad grammars are typed errors that
name the line, column and rule."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest
from lark import Lark
from lark.exceptions import LarkError

import onyx

# --- the grammars: each delimits its terminals (by punctuation, whitespace or what may follow),
# so that a character-level reading and lark's dynamic lexer (one regex match per terminal and
# position) accept the same texts ---

JSON = r"""
// A JSON value, whitespace allowed between tokens.
?start: value

?value: object
      | array
      | ESCAPED_STRING      -> string
      | SIGNED_NUMBER       -> number
      | "true" | "false" | "null"

object: "{" [member ("," member)*] "}"
member: ESCAPED_STRING ":" value
array: "[" [value ("," value)*] "]"

%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

ARITHMETIC = r"""
// Left-recursive, as Lark grammars usually are: read as repetition.
?start: sum

?sum: sum "+" product   -> add
    | sum "-" product   -> sub
    | product

?product: product "*" unary   -> mul
        | product "/" unary   -> div
        | product "%" unary   -> mod
        | unary

?unary: "-" unary | "+" unary | power
?power: atom "**" unary | atom

?atom: NUMBER
     | NAME "(" [sum ("," sum)*] ")"   -> call
     | NAME
     | "(" sum ")"

%import common.NUMBER
%import common.CNAME -> NAME
%import common.WS
%ignore WS
"""

CSV = r"""
// A header of names, then rows of numbers, quoted or bare text, or nothing.
start: header _EOL (row _EOL)* [row]
header: NAME ("," NAME)*
row: cell ("," cell)*
?cell: NUMBER | QUOTED | BARE |

NAME: /[A-Za-z_][A-Za-z0-9_ ]*/
QUOTED: "\"" /([^"]|"")*/ "\""
BARE: /[^",\r\n]+/
_EOL: /\r?\n/

%import common.NUMBER
"""

APPLY_PATCH = r"""
// A patch as a model writes it for an apply_patch tool: files added, deleted or updated by
// hunks of context, removed and added lines.
start: "*** Begin Patch" _NL action+ "*** End Patch" _NL?

?action: add | delete | update
add: "*** Add File: " PATH _NL new_line+
delete: "*** Delete File: " PATH _NL
update: "*** Update File: " PATH _NL [rename] edit+ [end_of_file]
rename: "*** Move to: " PATH _NL
?edit: anchor | kept | removed | added
anchor: "@@" [" " CONTEXT] _NL
kept: " " TEXT? _NL
removed: "-" TEXT? _NL
added: "+" TEXT? _NL
new_line: "+" TEXT? _NL
end_of_file: "*** End of File" _NL

PATH: /[^\r\n]+/
CONTEXT: /[^\r\n]+/
TEXT: /[^\r\n]+/
_NL: "\n"
"""

SQL = r"""
// One SELECT statement; keywords in any case, blanks required between words.
start: query (_S? ";")? _S?

query: "SELECT"i _S ["DISTINCT"i _S] columns _S "FROM"i _S table [_S where] [_S order] [_S limit]
columns: "*" | column (_S? "," _S? column)*
column: value [_S "AS"i _S NAME]
table: NAME [_S "AS"i _S NAME]

where: "WHERE"i _S condition
condition: conjunction (_S "OR"i _S conjunction)*
conjunction: predicate (_S "AND"i _S predicate)*
predicate: value _S? COMPARE _S? value
         | "NOT"i _S predicate
         | "(" _S? condition _S? ")"

order: "ORDER"i _S "BY"i _S ordering (_S? "," _S? ordering)*
ordering: value [_S ("ASC"i | "DESC"i)]
limit: "LIMIT"i _S INT

?value: NAME ["." NAME]
      | NUMBER
      | STRING
      | NAME "(" _S? (value | "*") _S? ")"

COMPARE: "=" | "!=" | "<>" | "<=" | ">=" | "<" | ">"
NAME: /[A-Za-z_][A-Za-z0-9_]*/
STRING: /'([^']|'')*'/
_S: /[ \t\n]+/

%import common.INT
%import common.NUMBER
"""

GRAMMARS = {"json": JSON, "arithmetic": ARITHMETIC, "csv": CSV, "apply_patch": APPLY_PATCH, "sql": SQL}

# Texts each grammar accepts and refuses, checked on both sides before anything else.
KNOWN = {
    "json": (['{"a": [1, -2.5e3, "x\\n"], "b": {"c": null}}', " [ ] ", '"\\""'], ['{"a": [1, 2,]}', "[1 2]", "tru"]),
    "arithmetic": (["1 + 2 * (3 - x) ** -2", "f(1, g(2)) % 3", "- -4 / 2"], ["1 +", "f(1,)", "2 3"]),
    "csv": (['id,name\n1,"a ""b"""\n2,\n,x y\n', "a\n"], ["a\n1\"2\n", 'a\n"x\n']),
    "apply_patch": (
        [
            "*** Begin Patch\n*** Add File: a.py\n+print(1)\n+\n*** Update File: b.py\n*** Move to: c.py\n@@ def f():\n-    return 1\n+    return 2\n \n*** Delete File: d.py\n*** End Patch\n",
        ],
        ["*** Begin Patch\n*** End Patch\n", "*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n"],
    ),
    "sql": (
        ["SELECT a, t.b AS c FROM t WHERE (a >= 1 OR b <> 'x''y') AND NOT c = 2 ORDER BY a DESC LIMIT 10;", "select count(*) from t"],
        ["SELECT FROM t", "SELECT a FROMt", "SELECT a FROM t LIMIT 1.5"],
    ),
}


def lark_parser(text: str) -> Lark:
    return Lark(text, parser="earley", lexer="dynamic")


def lark_accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except LarkError:
        return False


@pytest.fixture(scope="module")
def parsers() -> dict[str, Lark]:
    return {name: lark_parser(text) for name, text in GRAMMARS.items()}


@pytest.fixture(scope="module")
def compiled(vocabs) -> dict[tuple[str, str], onyx.Grammar]:
    return {(v, name): vocabs[v].compile_lark(text) for v in ("smollm2", "qwen2") for name, text in GRAMMARS.items()}


def onyx_ids(words) -> np.ndarray:
    bits = np.unpackbits(np.asarray(words).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits)


_LENGTHS: dict[int, np.ndarray] = {}


def token_lengths(vocab: onyx.Vocabulary) -> np.ndarray:
    """Bytes per token id (computed once per vocabulary)."""
    key = id(vocab)
    if key not in _LENGTHS:
        _LENGTHS[key] = np.array([len(vocab.token_bytes(t)) for t in range(vocab.size)])
    return _LENGTHS[key]


def walk(g: onyx.Grammar, vocab: onyx.Vocabulary, rng: random.Random, max_tokens: int) -> tuple[bytes, bool]:
    """A random walk through the budget-aware masks; (bytes written, ended at EOS). Half the
    steps take a token of one or two bytes when there is one: most allowed tokens are words
    inside free text, and the short ones (punctuation, keywords' pieces) reach the structure."""
    s, out = g.initial_state, b""
    eos = np.array(vocab.eos_token_ids)
    lengths = token_lengths(vocab)
    for i in range(max_tokens):
        allowed = onyx_ids(g.token_bitmask_within(s, max_tokens - i - 1))
        assert allowed.size, f"an empty mask after {out!r}"
        ending = np.isin(allowed, eos)
        tokens = allowed[~ending]
        if ending.any() and (rng.random() < 0.2 or not tokens.size):
            return out, True
        short = tokens[lengths[tokens] <= 2]
        pool = short if short.size and rng.random() < 0.5 else tokens
        t = int(pool[rng.randrange(pool.size)])
        s = g.advance(s, t)
        out += vocab.token_bytes(t)
    return out, bool(g.is_accepting(s))


def test_known_texts_are_judged_alike(compiled, parsers):
    for name, (good, bad) in KNOWN.items():
        g = compiled[("smollm2", name)]
        for text in good:
            assert lark_accepts(parsers[name], text), (name, text)
            assert g.validate(text).valid, (name, text)
        for text in bad:
            assert not lark_accepts(parsers[name], text), (name, text)
            assert not g.validate(text).valid, (name, text)


def test_every_grammar_compiles_on_three_vocabularies(vocabs, compiled):
    kinds = {}
    for name, text in GRAMMARS.items():
        g = vocabs["gemma3"].compile_lark(text)
        assert g.token_bitmask(g.initial_state).any(), name
        kinds[name] = compiled[("smollm2", name)].is_pushdown
    # Nesting (values, parentheses, conditions) makes a pushdown grammar; the line formats stay
    # one DFA, as a regex is.
    assert kinds == {"json": True, "arithmetic": True, "csv": False, "apply_patch": False, "sql": True}


@pytest.mark.parametrize("vocab_name", ["smollm2", "qwen2"])
def test_random_walks_parse_with_lark(vocabs, compiled, parsers, vocab_name):
    vocab = vocabs[vocab_name]
    rng = random.Random(5)
    for name in GRAMMARS:
        g = compiled[(vocab_name, name)]
        ended = 0
        for _ in range(30):
            out, at_eos = walk(g, vocab, rng, max_tokens=60)
            if at_eos:
                ended += 1
                text = out.decode("utf-8")
                assert g.validate(out).valid, (name, text)
                assert lark_accepts(parsers[name], text), (name, text)
        assert ended >= 15, (name, ended)  # budget-aware masks close most walks in time


def test_mutations_are_judged_as_lark_judges_them(vocabs, compiled, parsers):
    rng = random.Random(13)
    alphabet = {
        "json": '{}[]",:0123456789.e-tn \n',
        "arithmetic": "()+-*/%,.e0123456789xf \n",
        "csv": ',"\n\r01.ab ',
        "apply_patch": "*+-@ \nabc:",
        "sql": "SELECTFROMWHEREANDORselect()*,.=<>'0123 ;",
    }
    for name in GRAMMARS:
        g = compiled[("smollm2", name)]
        checked = 0
        for _ in range(25):
            out, at_eos = walk(g, vocabs["smollm2"], rng, max_tokens=50)
            if not at_eos:
                continue
            base = out.decode("utf-8")
            for _ in range(8):
                chars = list(base)
                i = rng.randrange(len(chars) + 1)
                op = rng.choice(["insert", "delete", "replace"])
                c = rng.choice(alphabet[name])
                if op == "insert":
                    chars.insert(i, c)
                elif i < len(chars):
                    if op == "delete":
                        del chars[i]
                    else:
                        chars[i] = c
                mutated = "".join(chars)
                assert bool(g.validate(mutated).valid) == lark_accepts(parsers[name], mutated), (name, mutated)
                checked += 1
        assert checked >= 80, name


def test_deep_nesting_has_no_depth_limit(compiled):
    g = compiled[("smollm2", "json")]
    deep = '{"a": ' * 40 + "1" + "}" * 40
    assert g.validate(deep).valid
    assert g.validate('{"a":' * 40 + "1" + "}" * 39).error_offset == len('{"a":' * 40 + "1" + "}" * 39)


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"],
    "additionalProperties": False,
}


def test_json_schema_inside_a_grammar(smollm2):
    grammar = f"""
start: TEXT | call
call: "<tool>" %json {json.dumps(SCHEMA, indent=2)} "</tool>"
TEXT: /[^<][^\\n]*/
"""
    g = smollm2.compile_lark(grammar)
    assert g.validate('<tool>{"city":"Oslo","days":3}</tool>').valid
    assert g.validate("no tool needed").valid
    assert not g.validate('<tool>{"city":"Oslo","days":9}</tool>').valid
    assert not g.validate('<tool>{"city":"Oslo"}</tool>').valid
    # The JSON is written compact, as compile_json_schema writes it by default.
    assert not g.validate('<tool>{"city": "Oslo", "days": 3}</tool>').valid
    # Once the tool call is open, only the schema's JSON may follow.
    s = g.initial_state
    for piece in ("<", "tool", ">"):
        s = g.advance(s, smollm2.find_tokens(piece)[0])
    assert all(smollm2.token_bytes(t).startswith(b"{") for t in onyx_ids(g.token_bitmask(s)).tolist())


def test_special_tokens_by_name(smollm2):
    g = smollm2.compile_lark('start: /[a-z ]+/ <|im_end|>\n')
    end = smollm2.find_tokens("<|im_end|>")[0]
    assert end in g.special_tokens
    s = g.advance(g.initial_state, smollm2.find_tokens("abc")[0])
    assert end in set(onyx_ids(g.token_bitmask(s)).tolist())


# (grammar, line, column, rule, part of the message, whether lark refuses it too)
BAD = [
    ('start: "a"\n     | "b\n', 2, 8, "start", "unterminated string", True),
    ("start: item\n", 1, 8, "item", "never defined", True),
    ('start: "x" NUMBER\n', 1, 12, "NUMBER", "never defined", True),
    ('begin: "x"\n', 0, 0, None, "no `start` rule", True),
    ('start: A\nA: "(" A? ")"\n', 2, 1, "A", "recursive", True),
    ('start: x{"a"}\n', 1, 9, "start", "templates", True),
    ('start: "a" ~ 3..2\n', 1, 12, "start", "maximum below", True),
    ("start: WS\n%import common.NOPE -> WS\n", 2, 9, "NOPE", "no terminal", True),
    # Lark reads these; a DFA or a top-down reader cannot.
    ("start: /(?<=a)b/\n", 1, 8, "start", "look-around", False),
    ('start: a\na: b "x" | "y"\nb: a "z"\n', 2, 1, "a", "left recursion", False),
    ('start: A\nA.2: "a"\n', 2, 2, "A", "terminal priorities", False),
    ('start: "a"\n%declare X\n', 2, 1, None, "%declare", False),
]


@pytest.mark.parametrize("text,line,column,rule,fragment,lark_refuses", BAD)
def test_bad_grammars_name_the_line_column_and_rule(smollm2, text, line, column, rule, fragment, lark_refuses):
    with pytest.raises(onyx.InvalidGrammarError) as info:
        smollm2.compile_lark(text)
    e = info.value
    assert fragment in str(e) and e.line == line and e.column == column and e.rule == rule, (str(e), e.line, e.column, e.rule)
    if lark_refuses:
        with pytest.raises(LarkError):
            lark_parser(text)
    else:
        lark_parser(text)


def test_no_finite_string_is_an_empty_language(smollm2):
    with pytest.raises(onyx.EmptyLanguageError):
        smollm2.compile_lark('start: "(" start ")"\n')


# Small grammars where the reading matters (ignored text around nullable rules and recursion,
# terminals made of terminals with counts and ranges, case-insensitive keywords next to names),
# with every text over a small alphabet up to a length: each is judged as lark judges it.
SMALL = [
    ('start: "a" b "c" | "(" start ")"\nb: "x"* | "y" b\n%ignore " "\n', "axyc() ", 5),
    ('start: PAIR ("," PAIR)~0..2\nPAIR: KEY "=" VAL?\nKEY: "a".."b" ~ 1..2\nVAL: /[0-9]/+\n', "ab=1,", 6),
    ('start: ("let"i NAME ";")*\nNAME: /[a-z]+/\n%ignore /#[^\\n]*\\n/\n%ignore " "\n', "leT;#\n ", 6),
]


@pytest.mark.parametrize("text,alphabet,longest", SMALL)
def test_every_short_text_is_judged_as_lark_judges_it(smollm2, text, alphabet, longest):
    g = smollm2.compile_lark(text)
    parser = lark_parser(text)
    accepted = 0
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            candidate = "".join(chars)
            ours = bool(g.validate(candidate).valid)
            assert ours == lark_accepts(parser, candidate), (text, candidate, ours)
            accepted += ours
    assert accepted >= 10
