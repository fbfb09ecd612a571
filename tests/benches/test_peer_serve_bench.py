"""bench/peer_serve_bench.py's checks and targets (the bench itself needs a llama-server binary
built for the machine and takes minutes: it is run by hand, docs/benchmarks.md): the GBNF sent to
llama.cpp is the language of the regex sent to Onyx, answers are judged by that language and the
schema, and the targets compare the two servers at the issue's goals."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.peer_serve_bench import WORDS, WORDS_GBNF, targets, valid  # noqa: E402

SENTENCE = "Dawn " + " ".join(["light"] * 30) + "."


def _candidates(rng: random.Random, n: int) -> list[str]:
    """Sentences near the language's edges: word counts around 24 and 64, a stray capital, digit,
    double space or missing period."""
    out = []
    for _ in range(n):
        words = [rng.choice(["a", "tree", "sun", "bird"]) for _ in range(rng.choice([22, 23, 24, 40, 63, 64, 65]))]
        text = rng.choice(["Dawn", "D", "dawn", "Mist"]) + " " + " ".join(words) + rng.choice([".", "", ". "])
        fault = rng.random()
        if fault < 0.1:
            text = text.replace(" a ", " A ", 1)
        elif fault < 0.2:
            text = text.replace(" sun", "  sun", 1)
        elif fault < 0.3:
            text = text.replace("tree", "tr3e", 1)
        out.append(text)
    return out


def test_the_gbnf_and_the_regex_are_one_language(smollm2):
    import re

    gbnf = smollm2.compile_gbnf(WORDS_GBNF)
    regex = smollm2.compile_regex(WORDS)
    texts = _candidates(random.Random(7), 300) + [SENTENCE]
    verdicts = [(bool(gbnf.validate(t)), bool(regex.validate(t)), re.fullmatch(WORDS, t) is not None) for t in texts]
    assert all(a == b == c for a, b, c in verdicts)
    assert 20 < sum(v[0] for v in verdicts) < len(texts) - 20  # both kinds of text were tried


def test_answers_are_judged_by_their_load():
    assert valid("grammar", SENTENCE) and not valid("grammar", SENTENCE[:-1])
    order = {"order_id": "ORD-1042", "customer": {"name": "Jane Doe"}, "items": [], "total": 1.0}
    assert valid("free", "anything at all")
    assert not valid("json", json.dumps(order)[:-1])  # cut off
    assert not valid("json", json.dumps({"order_id": 7}))


def _run(server: str, load: str, clients: int, tok_s: float, invalid: int = 0) -> dict:
    return {"server": server, "load": load, "clients": clients, "agg_tok_s": tok_s, "invalid": invalid}


def test_targets_are_ratios_against_the_goals():
    runs = [_run("onyx", "free", 1, 40.0), _run("llama.cpp", "free", 1, 160.0),
            _run("onyx", "json", 1, 90.0), _run("llama.cpp", "json", 1, 60.0),
            _run("onyx", "json", 8, 240.0), _run("llama.cpp", "json", 8, 80.0, invalid=12)]
    t = targets(runs)
    assert t["free_1"] == {"onyx_over_llama_cpp": 0.25, "goal": 1.0, "met": False}
    assert t["json_1"] == {"onyx_over_llama_cpp": 1.5, "goal": 1.5, "met": True}
    assert t["json_8"]["onyx_over_llama_cpp"] == 3.0 and t["json_8"]["met"]
    assert t["grammar_8"] == {"onyx_over_llama_cpp": None, "goal": 1.5, "met": False}  # not run
    assert t["invalid_onyx"] == 0 and t["invalid_llama.cpp"] == 12
