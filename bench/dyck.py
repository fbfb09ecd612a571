"""Bounded Dyck languages D(d, L) and a toy LM (the Φ paper's Table 2 setup).

D(d, L): balanced strings over one bracket pair with nesting depth <= d and length <= L (D(3,12)
has 145 strings, D(3,16) 988, the paper's support sizes). The language is finite, hence
regular, so its grammar is the real grammar core: a regex (the alternation of the strings)
compiled against a real three-token vocabulary, "(" (OPEN), ")" (CLOSE) and EOS.

The toy LM is a fixed random autoregressive model: after a prefix, a bias toward "(" plus
Gaussian noise seeded by a hash of the whole prefix, so every history has its own next-token
law (deep, long strings look locally attractive although they rarely close validly).
"""

from __future__ import annotations

import hashlib

import numpy as np

from onyx.decoding.phi import TokenTrie

from bench.phi_laws import tiny_vocab

OPEN, CLOSE, EOS = 0, 1, 2


def dyck_strings(depth: int, length: int) -> list[str]:
    out = []

    def rec(s: str, h: int) -> None:
        if h == 0:
            out.append(s)
        if h < depth and len(s) + 1 + h + 1 <= length:
            rec(s + "(", h + 1)
        if h > 0:
            rec(s + ")", h - 1)

    rec("", 0)
    return out


def dyck_grammar(depth: int, length: int):
    strings = dyck_strings(depth, length)
    vocab = tiny_vocab(["(", ")"])
    alts = "|".join(s.replace("(", r"\(").replace(")", r"\)") for s in strings if s)
    return vocab, vocab.compile_regex(f"(?:{alts})?"), strings


class ToyLM:
    """logits(prefix) = bias + sigma * N(0, I), the noise seeded by a hash of the prefix."""

    def __init__(self, bias=(0.5, 0.0, 0.0), sigma: float = 0.5, seed: int = 0) -> None:
        self.bias = np.asarray(bias, dtype=np.float64)
        self.sigma = sigma
        self.seed = seed

    def __call__(self, path) -> np.ndarray:
        key = hashlib.blake2b(f"{self.seed}:{','.join(map(str, path))}".encode(), digest_size=8).digest()
        eps = np.random.default_rng(int.from_bytes(key, "little")).standard_normal(3)
        return self.bias + self.sigma * eps


def dyck_setup(depth: int, length: int):
    """(grammar, its full token trie, the strings)."""
    vocab, grammar, strings = dyck_grammar(depth, length)
    trie = TokenTrie.full(grammar, max_nodes=100_000)
    return grammar, trie, strings


LM = ToyLM(bias=(0.5, 0.0, 0.0), sigma=0.5, seed=0)  # the model of the test and the bench
