"""The Φ estimator hierarchy on bounded Dyck languages with a toy LM (the Φ paper's Table 2 setup).

Language: D(d, L) = balanced strings over one bracket pair with nesting depth <= d and length
<= L, plus EOS, as in the paper's appendix G (one bracket type: D(3,12) has 145 strings and
D(3,16) has 988, the paper's support sizes; three bracket types would give millions of strings).
It is finite, hence regular, so the grammar is the real grammar core: a regex (the alternation of
the strings) compiled against a real three-token vocabulary: "(", ")" and EOS.

Toy LM: a fixed random autoregressive model. The logits after a prefix are a bias toward "("
plus Gaussian noise seeded by a hash of the whole prefix, so every history has its own
next-token law (an opening bias makes deep, long strings locally attractive although they
rarely close validly: the paper's failure mode).

Checked: the analytic laws over the language (μ^proj: local masking, μ^1s: OneStep, μ*: the
model conditioned on validity) are ordered TV(μ^proj, μ*) > TV(μ^1s, μ*) > TV(exact, μ*) = 0, and
the product's own speculative loop (`onyx.decoding.verify` with `Proposal`s drawn from a draft
distribution q != p, `Sampler`, `MaskCache` and the `onyx.decoding.phi` providers) samples each of them
to within the sampling floor, so the empirical TVs to μ* reproduce the hierarchy
Uniform > OneStep > Exact with Exact at the floor. The floor is calibrated: the 99.9% quantile
of TV(empirical, law) over multinomial draws of the same size from the law itself.

The helpers (`fvo_sample`, `tv`, `tv_floor`, `dyck_setup`, `trie_laws`) are also used by
tests/test_phi_distribution.py and bench/phi_bench.py.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import numpy as np
import pytest

import onyx  # noqa: F401  (before mlx: OpenBLAS)
import mlx.core as mx

from onyx.decoding.verify import verify as _verify
from onyx.decoding.drafts import Proposal
from onyx.decoding.phi import ExactPhi, OneStepPhi, TokenTrie, _logsumexp, score_with_function
from onyx.constraint import MaskCache
from onyx.decoding.sampling import Sampler, apply_mask, distribution
from onyx.options import SamplingParams

OPEN, CLOSE, EOS = 0, 1, 2

# ------------------------------------------------------------------------------------------------
# Language, grammar, toy LM
# ------------------------------------------------------------------------------------------------


def tiny_vocab(tokens: list[str], extra_special: int = 0) -> onyx.Vocabulary:
    """A real tokenizer.json (byte-level BPE, no merges) over exactly these tokens, then
    `extra_special` special tokens the grammar never allows, then EOS (the last id)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    n = len(tokens)
    added = [{"id": n + i, "content": f"<|other{i}|>", "special": True} for i in range(extra_special)]
    eos = n + extra_special
    added.append({"id": eos, "content": "<|endoftext|>", "special": True})
    doc = {
        "version": "1.0",
        "added_tokens": added,
        "decoder": {"type": "ByteLevel"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    return onyx.Vocabulary.from_tokenizer_json_str(json.dumps(doc), eos_token_ids=[eos])


def byte_level_spelling(token_bytes: list[bytes]) -> list[str]:
    """Each token's bytes spelled as a byte-level BPE vocabulary spells them (GPT-2's byte ->
    printable character map), to build a `tiny_vocab` from a real model's tokens."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {b: chr(b) for b in printable}
    for b in range(256):
        if b not in table:  # the others, in byte order, become U+0100, U+0101, ...
            table[b] = chr(256 + len(table) - len(printable))
    return ["".join(table[b] for b in tb) for tb in token_bytes]


def prepared_exact_phi(engine, prompt_ids: list[int], grammar) -> ExactPhi:
    """The product's exact-Φ preparation on a real model: the trie scored on forks of the
    prompt's paged KV (temperature 1)."""
    seq, _, _ = engine.runner.prefill(prompt_ids[:-1], leave_last=False)
    try:
        phi = ExactPhi()
        phi.prepare(engine.runner, seq, prompt_ids, grammar, SamplingParams(temperature=1.0))
    finally:
        seq.free()
    return phi


def compact_grammar(engine, trie: TokenTrie, schema) -> dict:
    """A real model's token trie in a compact vocabulary: the trie's tokens (same bytes), then
    OTHER (every other token) and EOS, with the schema compiled over it. `to_small` maps the
    model's token ids to the compact ones."""
    big_ids = sorted({t for t in trie.token[1:]})
    vocab = tiny_vocab(byte_level_spelling([engine.vocab.token_bytes(t) for t in big_ids]), extra_special=1)
    return dict(big_ids=big_ids, to_small={t: i for i, t in enumerate(big_ids)}, other=len(big_ids),
                eos=len(big_ids) + 1, width=len(big_ids) + 2, grammar=vocab.compile_json_schema(json.dumps(schema)))


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


def dyck_setup(depth: int, length: int, lm: ToyLM):
    vocab, grammar, strings = dyck_grammar(depth, length)
    trie = TokenTrie.full(grammar, max_nodes=100_000)
    return grammar, trie, strings


# ------------------------------------------------------------------------------------------------
# Analytic laws over a full token trie
# ------------------------------------------------------------------------------------------------


def trie_laws(trie: TokenTrie, logits_of, eos: list[int]) -> dict[str, dict[tuple, float]]:
    """μ^proj, μ^1s (OneStep) and μ* over the trie's outputs, computed here from the logits
    (independently of onyx.decoding.phi). `logits_of(path)` is the model's (V,) next-token logits."""
    proj, one, star = {}, {}, {}
    stack = [(0, 0.0, 0.0, 0.0)]
    while stack:
        n, lp_proj, lp_one, lp_model = stack.pop()
        z = np.asarray(logits_of(trie.path(n)), dtype=np.float64)
        lp = z - _logsumexp(z)
        kids = trie.children[n]
        allowed = list(kids) + (list(eos) if trie.accepting[n] else [])
        z_proj = _logsumexp(lp[allowed])
        w = {}
        for y in allowed:
            if y in kids:
                c = kids[y]
                nxt = list(trie.children[c]) + (list(eos) if trie.accepting[c] else [])
                w[y] = lp[y] + _logsumexp(lp[nxt])
            else:
                w[y] = lp[y]  # Φ̂(EOS) = 1
        z_one = _logsumexp(np.array(list(w.values())))
        if trie.accepting[n]:
            key = tuple(trie.path(n))
            e_lp = _logsumexp(lp[list(eos)])
            proj[key] = lp_proj + e_lp - z_proj
            one[key] = lp_one + _logsumexp(np.array([w[e] for e in eos])) - z_one
            star[key] = lp_model + e_lp
        for y, c in kids.items():
            stack.append((c, lp_proj + lp[y] - z_proj, lp_one + w[y] - z_one, lp_model + lp[y]))
    out = {}
    for name, law in (("proj", proj), ("onestep", one), ("star", star)):
        keys = list(law)
        vals = np.array([law[k] for k in keys])
        p = np.exp(vals - _logsumexp(vals))
        out[name] = dict(zip(keys, p.tolist()))
    return out


def tv(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def tv_floor(law: dict, n: int, *, q: float = 0.999, reps: int = 400, seed: int = 0) -> float:
    """The q-quantile of TV(empirical of n draws from `law`, `law`): the sampling floor."""
    p = np.array(list(law.values()), dtype=np.float64)
    p = p / p.sum()
    draws = np.random.default_rng(seed).multinomial(n, p, size=reps) / n
    return float(np.quantile(0.5 * np.abs(draws - p).sum(axis=1), q))


def empirical(counts: Counter) -> dict:
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


# ------------------------------------------------------------------------------------------------
# The product's speculative loop on memoized logits
# ------------------------------------------------------------------------------------------------


class Rows:
    """Memoized (V,) target logits and draft distributions per token prefix."""

    def __init__(self, logits_of, grammar, masks: MaskCache, draft_temperature: float, width: int) -> None:
        self.logits_of = logits_of
        self.grammar = grammar
        self.masks = masks
        self.draft_t = draft_temperature
        self.width = width
        self._rows: dict[tuple, mx.array] = {}
        self._q: dict[tuple, tuple] = {}

    def row(self, prefix: tuple) -> mx.array:
        r = self._rows.get(prefix)
        if r is None:
            if any(t in self.grammar.eos_token_ids for t in prefix):
                r = mx.zeros((self.width,), dtype=mx.float32)  # after an EOS draft: never used
            else:
                r = mx.array(np.asarray(self.logits_of(list(prefix)), dtype=np.float32))
            self._rows[prefix] = r
        return r

    def draft(self, prefix: tuple, state: int):
        """The draft law q at a prefix: the target tempered by `draft_t`, grammar-masked (so it
        differs from the target's law and exercises rejection and residual resampling)."""
        hit = self._q.get(prefix)
        if hit is None:
            q = distribution(apply_mask(self.row(prefix), self.masks.get(state)),
                             SamplingParams(temperature=self.draft_t))
            qn = np.asarray(q, dtype=np.float64)
            support = np.nonzero(qn > 0)[0]
            hit = (q, support, qn[support] / qn[support].sum())
            self._q[prefix] = hit
        return hit


def fvo_sample(n: int, grammar, rows: Rows, phi, *, gamma: int = 3, seed: int = 0, prompt: tuple = (),
               verify=None) -> tuple[Counter, float]:
    """n outputs of the product's speculative verifier (`_verify`) against memoized logits,
    mirroring `onyx.decoding.decode`'s round structure. Returns output counts and the draft
    acceptance rate."""
    verify = verify or _verify
    params = SamplingParams(temperature=1.0, seed=seed)
    sampler = Sampler(params)
    rng = np.random.default_rng(seed + 1)
    masks = rows.masks
    eos = set(grammar.eos_token_ids)
    counts: Counter = Counter()
    drafted = accepted_total = 0
    for _ in range(n):
        out: list[int] = []
        state = grammar.initial_state
        done = False
        while not done:
            proposal = Proposal()
            s = state
            for _ in range(gamma):
                q, support, probs = rows.draft(tuple(out + proposal.tokens), s)
                t = int(support[rng.choice(len(support), p=probs)])
                proposal.add(t, q, "model")
                if t in eos:
                    break
                s = grammar.advance(s, t)
                if masks.only_eos(s):
                    break
            drafts = proposal.tokens
            logits = mx.stack([rows.row(tuple(out + drafts[:i])) for i in range(len(drafts) + 1)])
            m, new, states = verify(logits, proposal, grammar, masks, state, params, sampler, 1 << 20, phi,
                                    list(prompt) + out)
            drafted += len(drafts)
            accepted_total += m
            for i, token in enumerate(drafts[:m] + [new]):
                if token in eos:
                    done = True
                    break
                state = states[i + 1] if i < m else grammar.advance(state, token)
                out.append(token)
                if masks.only_eos(state):
                    done = True
                    break
        counts[tuple(out)] += 1
    return counts, (accepted_total / drafted if drafted else 0.0)


def providers(grammar, trie, logits_of, width: int, prompt_len: int = 0):
    params = SamplingParams(temperature=1.0)
    exact = ExactPhi(max_nodes=100_000).fit(trie, score_with_function(trie, logits_of), grammar=grammar,
                                            vocab_size=width, temperature=1.0, prompt_len=prompt_len)
    onestep = OneStepPhi().configure(grammar, width, params)
    return {"uniform": None, "onestep": onestep, "exact": exact}


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------

LM = ToyLM(bias=(0.5, 0.0, 0.0), sigma=0.5, seed=0)


@pytest.fixture(scope="module", params=[(3, 12), (3, 16)], ids=["D(3,12)", "D(3,16)"])
def dyck(request):
    depth, length = request.param
    grammar, trie, strings = dyck_setup(depth, length, LM)
    laws = trie_laws(trie, LM, [EOS])
    return dict(depth=depth, length=length, grammar=grammar, trie=trie, strings=strings, laws=laws)


def test_language_matches_the_papers_support_sizes(dyck):
    expected = {12: 145, 16: 988}[dyck["length"]]
    assert len(dyck["strings"]) == expected
    assert len(dyck["laws"]["star"]) == expected
    decoded = {"".join("()"[t] for t in k) for k in dyck["laws"]["star"]}
    assert decoded == set(dyck["strings"])


def test_analytic_hierarchy(dyck):
    laws = dyck["laws"]
    exact = providers(dyck["grammar"], dyck["trie"], LM, 3)["exact"].law()
    u, o, e = tv(laws["proj"], laws["star"]), tv(laws["onestep"], laws["star"]), tv(exact, laws["star"])
    assert e < 1e-9
    assert u > 0.3 and u > o + 0.05 and o > 0.2, (u, o, e)


def test_sampled_hierarchy_through_the_product_verifier(dyck):
    grammar, trie, laws = dyck["grammar"], dyck["trie"], dyck["laws"]
    masks = MaskCache(grammar, 3)
    rows = Rows(LM, grammar, masks, draft_temperature=2.0, width=3)
    phis = providers(grammar, trie, LM, 3)
    n = 4000
    got = {}
    for name, target in (("uniform", "proj"), ("onestep", "onestep"), ("exact", "star")):
        counts, acc = fvo_sample(n, grammar, rows, phis[name], gamma=5, seed=11)
        emp = empirical(counts)
        floor = tv_floor(laws[target], n)
        # each estimator's loop samples exactly its own law ...
        assert tv(emp, laws[target]) <= floor, (name, tv(emp, laws[target]), floor)
        assert 0.1 < acc < 0.99  # drafts were both accepted and rejected
        got[name] = tv(emp, laws["star"])
        print(f"{name}: TV(emp, own law) {tv(emp, laws[target]):.4f} floor {floor:.4f}; TV(emp, mu*) {got[name]:.4f}; acceptance {acc:.3f}")
    # ... so the empirical TVs to μ* reproduce Uniform > OneStep > Exact, Exact at the floor.
    floor_star = tv_floor(laws["star"], n)
    assert got["exact"] <= floor_star
    assert got["uniform"] > got["onestep"] + 0.03 > got["exact"] + 0.1, got


def test_phi_is_a_per_token_vector(dyck):
    """The paper's invariant: a scalar Φ is a no-op (softmax shift invariance); Φ must vary
    across the valid tokens of a state, and the loop must see a (V,) vector."""
    grammar, trie = dyck["grammar"], dyck["trie"]
    phis = providers(grammar, trie, LM, 3)
    masks = MaskCache(grammar, 3)
    s0 = grammar.initial_state
    raw = mx.array(LM([]).astype(np.float32))
    masked = apply_mask(raw, masks.get(s0))
    base = distribution(masked, SamplingParams(temperature=1.0))
    for name in ("onestep", "exact"):
        w = phis[name].log_weights([], s0, masked, raw)
        assert w.shape == (3,)
        valid = [OPEN, EOS]  # at the root: "(" or the empty string
        vals = np.asarray(w)[valid]
        assert np.ptp(vals) > 1e-3, (name, vals)
        moved = distribution(masked + w, SamplingParams(temperature=1.0))
        assert float(mx.abs(moved - base).max()) > 1e-3
        const = distribution(masked + float(vals.mean()), SamplingParams(temperature=1.0))
        assert float(mx.abs(const - base).max()) < 1e-6  # what a scalar "Φ" would do: nothing
    # Exact Φ at the root is the probability of a valid completion after each token.
    exact = phis["exact"]
    assert exact.log_phi(0)[EOS] == 0.0
    assert 0.0 < np.exp(exact.log_phi(0)[OPEN]) < 1.0
