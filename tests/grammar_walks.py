"""Walking a grammar the way a decoder does, for tests: random walks, and finishing a walk by
the shortest route to acceptance."""

from __future__ import annotations

import random

import numpy as np

import onyx


def ordinary_allowed(g: onyx.Grammar, vocab: onyx.Vocabulary, state: int) -> np.ndarray:
    """Allowed token ids of `state` without the EOS ids."""
    allowed = g.allowed_token_ids(state)
    return allowed[~np.isin(allowed, vocab.eos_token_ids)]


def random_walk(g: onyx.Grammar, vocab: onyx.Vocabulary, rng: random.Random, steps: int) -> tuple[list[int], int]:
    """Takes up to `steps` random allowed tokens; returns the tokens and the final state."""
    state, tokens = g.initial_state, []
    for _ in range(steps):
        allowed = ordinary_allowed(g, vocab, state)
        if len(allowed) == 0:
            break
        t = int(allowed[rng.randrange(len(allowed))])
        state = g.advance(state, t)
        tokens.append(t)
    return tokens, state


def finish(g: onyx.Grammar, vocab: onyx.Vocabulary, state: int, rng: random.Random, limit: int = 10_000) -> tuple[list[int], int]:
    """Completes a walk to an accepting state, always taking a token that brings acceptance
    one token closer (min_tokens_to_accept strictly decreases, so this terminates)."""
    tokens = []
    while not g.is_accepting(state):
        need = g.min_tokens_to_accept(state)
        toks, nexts = g.transitions(state)
        good = [n for n in np.unique(nexts).tolist() if g.min_tokens_to_accept(n) == need - 1]
        closer = toks[np.isin(nexts, good)]
        assert len(closer), f"state {state} needs {need} tokens but no allowed token gets closer"
        t = int(closer[rng.randrange(len(closer))])
        state = g.advance(state, t)
        tokens.append(t)
        assert len(tokens) < limit
    return tokens, state


def text_of(vocab: onyx.Vocabulary, tokens: list[int]) -> bytes:
    return b"".join(vocab.token_bytes(t) for t in tokens)
