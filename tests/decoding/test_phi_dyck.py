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
distribution q != p, `Sampler`, `Constraint` and the `onyx.decoding.phi` providers) samples each of them
to within the sampling floor, so the empirical TVs to μ* reproduce the hierarchy
Uniform > OneStep > Exact with Exact at the floor. The floor is calibrated: the 99.9% quantile
of TV(empirical, law) over multinomial draws of the same size from the law itself.

The language and the toy LM are in bench/dyck.py, the laws and the loop in bench/phi_laws.py
(shared with tests/test_phi_distribution.py and bench/phi_bench.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)
import mlx.core as mx

from onyx.decoding.sampling import apply_mask, distribution, mask_to_mlx
from onyx.grammar.constraint import Constraint
from onyx.options import SamplingParams

from bench.dyck import EOS, LM, OPEN, dyck_setup
from bench.phi_laws import Rows, empirical, fvo_sample, providers, trie_laws, tv, tv_floor

@pytest.fixture(scope="module", params=[(3, 12), (3, 16)], ids=["D(3,12)", "D(3,16)"])
def dyck(request):
    depth, length = request.param
    grammar, trie, strings = dyck_setup(depth, length)
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


@pytest.mark.slow
def test_sampled_hierarchy_through_the_product_verifier(dyck):
    grammar, trie, laws = dyck["grammar"], dyck["trie"], dyck["laws"]
    rows = Rows(LM, grammar, draft_temperature=2.0, width=3)
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
    masks = Constraint.of(grammar, 3, mask_to_mlx, "mlx")
    s0 = grammar.initial_state
    raw = mx.array(LM([]).astype(np.float32))
    masked = apply_mask(raw, masks.mask(s0))
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
