"""GBNF (llama.cpp's grammar language): every grammar llama.cpp ships compiles on three real
vocabularies, texts walked at random through the token masks parse with an independent parser
(the `lark` package, the grammar translated mechanically), texts the independent parser and the
grammar disagree on do not exist among mutations of those walks, and bad grammars are typed
errors that name the line, column and rule."""

from __future__ import annotations

import random
import re

import pytest
from lark import Lark
from lark.exceptions import LarkError

import onyx
from onyx.models import assets


@pytest.fixture(scope="module")
def grammars() -> dict[str, str]:
    folder = assets.fetch("llama-cpp-grammars", quiet=True)
    out = {p.stem: p.read_text() for p in sorted(folder.glob("*.gbnf"))}
    assert len(out) >= 8, sorted(out)
    return out


# --- a mechanical translation to Lark (Earley with the dynamic lexer reads terminals at any
# position, as GBNF's code-point terminals are) ---

_TOKEN = re.compile(r'''\s+|\#[^\n]*|"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|::=|[a-zA-Z0-9_-]+|\{[^}]*\}|[()|*+?.]''')


def to_lark(gbnf: str) -> str:
    """The Lark grammar of a GBNF text: rule names prefixed, strings kept (both take Python's
    escapes), classes and `.` as regex terminals, `{m,n}` as Lark's `~ m..n`."""
    rules: list[tuple[str, list[str]]] = []
    depth = 0
    pos = 0
    pending_name = None
    for m in _TOKEN.finditer(gbnf):
        assert m.start() == pos, f"cannot translate at {gbnf[pos:pos + 20]!r}"
        pos = m.end()
        tok = m.group()
        if tok.isspace() or tok.startswith("#"):
            continue
        if tok == "::=":
            rules.append((pending_name, []))
            pending_name = None
            continue
        if re.fullmatch(r"[a-zA-Z0-9_-]+", tok):
            # A name right before `::=` starts a rule (outside parentheses, after a complete item).
            nxt = _TOKEN.match(gbnf, pos)
            rest = gbnf[pos:].lstrip(" \t")
            if depth == 0 and rest.startswith("::="):
                pending_name = "r_" + tok.lower().replace("-", "_")
                continue
            rules[-1][1].append("r_" + tok.lower().replace("-", "_"))
            del nxt
            continue
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        if tok.startswith("["):
            tok = "/" + tok.replace("/", "\\/") + "/"
        elif tok == ".":
            tok = "/./s"
        elif tok.startswith("{"):
            lo, _, hi = tok[1:-1].partition(",")
            lo = int(lo or 0)
            if "," not in tok:
                tok = f"~ {lo}"
            elif hi.strip():
                tok = f"~ {lo}..{int(hi)}"
            else:
                # `x{m,}`: m copies then any more, as `x~m x*` (Lark's ranges are bounded)
                prev = rules[-1][1].pop()
                rules[-1][1].append(f"({prev}~{lo} {prev}*)" if lo else f"{prev}*")
                continue
        rules[-1][1].append(tok)
    return "\n".join(f"{name}: {' '.join(body)}" for name, body in rules) + "\n"


def lark_for(gbnf: str) -> Lark:
    return Lark(to_lark(gbnf), start="r_root", parser="earley", lexer="dynamic")


def lark_accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except LarkError:
        return False


def test_every_llama_cpp_grammar_compiles_on_three_vocabularies(vocabs, grammars):
    kinds = {}
    for vocab in vocabs.values():
        for name, text in grammars.items():
            g = vocab.compile_gbnf(text)
            kinds[name] = g.is_pushdown
            assert g.token_bitmask(g.initial_state).any(), name
    # Recursive ones (nested values, expressions, statements) are pushdown grammars; the others
    # are one DFA, as a regex is.
    assert kinds["json"] and kinds["json_arr"] and kinds["c"] and kinds["arithmetic"]
    assert not kinds["chess"] and not kinds["list"]


def walk(g: onyx.Grammar, vocab: onyx.Vocabulary, rng: random.Random, max_tokens: int) -> tuple[bytes, bool]:
    """A random walk through the budget-aware masks; (bytes written, ended at EOS)."""
    s, out = g.initial_state, b""
    eos = set(vocab.eos_token_ids)
    for i in range(max_tokens):
        words = g.token_bitmask_within(s, max_tokens - i - 1)
        allowed = [int(t) for t in onyx_ids(words)]
        assert allowed, f"an empty mask after {out!r}"
        ends = [t for t in allowed if t in eos]
        if ends and (rng.random() < 0.3 or len(allowed) == len(ends)):
            return out, True
        t = rng.choice([t for t in allowed if t not in eos])
        s = g.advance(s, t)
        out += vocab.token_bytes(t)
    return out, bool(g.is_accepting(s))


def onyx_ids(words) -> list[int]:
    import numpy as np

    bits = np.unpackbits(np.asarray(words).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).tolist()


@pytest.mark.parametrize("vocab_name", ["smollm2", "qwen2"])
def test_random_walks_parse_with_an_independent_parser(vocabs, grammars, vocab_name):
    vocab = vocabs[vocab_name]
    rng = random.Random(7)
    for name, text in grammars.items():
        g = vocab.compile_gbnf(text)
        parser = lark_for(text)
        ended = 0
        for _ in range(12):
            out, at_eos = walk(g, vocab, rng, max_tokens=80)
            decoded = out.decode("utf-8")
            if at_eos:
                ended += 1
                assert g.validate(out).valid, (name, decoded)
                assert lark_accepts(parser, decoded), (name, decoded)
        assert ended >= 6, (name, ended)  # budget-aware masks close most walks in time


def test_mutations_are_judged_as_the_independent_parser_judges_them(vocabs, grammars):
    vocab = vocabs["smollm2"]
    rng = random.Random(11)
    for name in ("json", "arithmetic", "c", "json_arr", "list"):
        text = grammars[name]
        g = vocab.compile_gbnf(text)
        parser = lark_for(text)
        checked = 0
        for _ in range(10):
            out, at_eos = walk(g, vocab, rng, max_tokens=60)
            if not at_eos:
                continue
            base = out.decode("utf-8")
            for _ in range(8):
                chars = list(base)
                i = rng.randrange(len(chars) + 1)
                op = rng.choice(["insert", "delete", "replace"])
                c = rng.choice('{}[]",:0123456789abc ()\n=+-*/;')
                if op == "insert":
                    chars.insert(i, c)
                elif chars and i < len(chars):
                    if op == "delete":
                        del chars[i]
                    else:
                        chars[i] = c
                mutated = "".join(chars)
                assert bool(g.validate(mutated).valid) == lark_accepts(parser, mutated), (name, mutated)
                checked += 1
        assert checked >= 16, name


def test_deep_nesting_has_no_depth_limit(vocabs, grammars):
    g = vocabs["smollm2"].compile_gbnf(grammars["json"])
    deep = '{"a":' * 40 + "1" + "}" * 40
    assert g.validate(deep).valid
    assert g.validate('{"a":' * 40 + "1" + "}" * 39).error_offset == len(deep) - 1


@pytest.mark.parametrize("text,line,column,rule,fragment", [
    ('root ::= "a" |\n  "b" "\n', 2, 7, "root", "unterminated string"),
    ("root ::= item\n", 1, 10, "item", "never defined"),
    ("root ::= root \"x\" | \"y\"\n", 0, 0, "root", "left recursion"),
    ('rot ::= "x"\n', 0, 0, None, "no `root` rule"),
    ('root ::= [z-a]\n', 1, 10, "root", "backwards"),
    ('root ::= "a" !<x>\n', 1, 14, "root", "negated tokens"),
    ('root ::= "a"{3,2}\n', 1, 13, "root", "below the minimum"),
    ('root ::= ("a" | "b"\n', 2, 1, "root", "expected `)`"),
    ('root ::= "\\q"\n', 1, 11, "root", "unknown escape"),
])
def test_bad_grammars_name_the_line_column_and_rule(smollm2, text, line, column, rule, fragment):
    with pytest.raises(onyx.InvalidGrammarError) as info:
        smollm2.compile_gbnf(text)
    e = info.value
    assert fragment in str(e) and e.line == line and e.column == column and e.rule == rule, (str(e), e.line, e.column, e.rule)


def test_no_finite_string_is_an_empty_language(smollm2):
    with pytest.raises(onyx.EmptyLanguageError):
        smollm2.compile_gbnf('root ::= "(" root ")"\n')


def test_token_references(smollm2):
    # A special token by its text: read as its marker byte, allowed exactly there.
    g = smollm2.compile_gbnf('root ::= [a-z]+ <|im_end|>\n')
    end = smollm2.find_tokens("<|im_end|>")[0]
    assert g.special_tokens and end in g.special_tokens
    s = g.advance(g.initial_state, smollm2.find_tokens("abc")[0])
    assert end in set(onyx_ids(g.token_bitmask(s)))
    # By id, and an ordinary token by its text (read as its bytes).
    g = smollm2.compile_gbnf(f"root ::= <[{end}]> \"x\"\n")
    assert end in set(onyx_ids(g.token_bitmask(g.initial_state)))
    with pytest.raises(onyx.InvalidGrammarError, match="no single token"):
        smollm2.compile_gbnf("root ::= <no-such-token-anywhere>\n")


def test_the_translation_to_lark_is_checked_too(grammars):
    """The independent parser is only independent if the translation is right: it accepts known
    texts and refuses known non-texts of llama.cpp's JSON grammar."""
    parser = lark_for(grammars["json"])
    assert lark_accepts(parser, '{"a": [1, 2.5e3, "x\\n"], "b": {"c": null}}')
    assert not lark_accepts(parser, '{"a": [1, 2,]}')
    assert not lark_accepts(parser, '[1]')  # the root is an object
