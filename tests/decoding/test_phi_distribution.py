"""Distribution tests of Φ reweighting on the real default model (SmolLM2-135M-Instruct).

Language: the JSON Schema {"enum": ["ok", "okay", "failed"]} after a status question. Its full
token trie (every tokenization of '"ok"', '"okay"', '"failed"' the grammar allows) has ~100
nodes. The model's local preferences mislead here: masking keeps lots of mass on odd
tokenizations and on '"okay"' (28% under μ^proj, 4% under μ*), branches the model rarely
completes validly on its own, so μ^proj and μ* are far apart (TV ~0.7 over token sequences).

Ground truth, computed here independently of onyx.decoding.phi: the model's next-token logits at every
trie prefix, run through mlx-lm's own KV cache (not Onyx's paged cache); from them μ^proj (the
product of masked, renormalised conditionals along each token path, times the masked EOS
probability) and μ* (the model's probability of each full output incl. EOS, renormalised over
the language).

Checks: the product's trie scoring (`ExactPhi.prepare`: forks of the prompt's paged KV, one
forward per leaf) gives the same log-probabilities; then >= 20,000 outputs per arm are drawn by
the product's own verifier (`onyx.decoding.verify`, `Proposal`, `Sampler`, `Constraint`, the
`onyx.decoding.phi` provider) at temperature 1 with a draft law q != p (the masked target tempered to
T = 0.5), so accept/reject and residual resampling both run. TV(empirical phi="none", μ^proj) and
TV(empirical phi="exact", μ*) must be under the sampling floor (the 99.9% quantile of the TV of
a same-size multinomial sample from the law itself), while TV(μ^proj, μ*) is far above it. The
appendix-H "accept when the draft equals an independent target sample" verifier fails the
same check. Each arm can fail: swapping the laws makes every assertion false.

Speed: sampling runs in a compact vocabulary that preserves every probability exactly. The same
schema is compiled by the real grammar core against a real tokenizer whose tokens are exactly
the trie's tokens (same bytes), plus one special token the grammar never allows that carries the
log-sum-exp of all other logits, plus EOS. The grammar's token trie is then the same (checked),
each row's softmax gives the real model's probabilities for every trie token, and a verifier
round works on ~30-wide rows instead of 49,152-wide ones.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)
import mlx.core as mx

from onyx.decoding.phi import DEAD_LOG_WEIGHT, ExactPhi, TokenTrie, _logsumexp, make_phi, score_with_function
from onyx.decoding.sampling import distribution

from bench.phi_laws import Rows, build_case, empirical, fvo_sample, trie_laws, tv, tv_floor

PROMPT = [{"role": "user", "content": "What is the status of the job?"}]
SCHEMA = {"enum": ["ok", "okay", "failed"]}
N = 20_000
DRAFT_T = 0.5  # the draft law q: the masked target sharpened to T = 0.5 (q != p)


@pytest.fixture(scope="module")
def setup(engine):
    return build_case(engine, PROMPT, SCHEMA)


@pytest.fixture(scope="module")
def laws(setup):
    out = trie_laws(setup["small_trie"], setup["logits_of"], [setup["small_eos"]])
    assert abs(sum(out["star"].values()) - 1) < 1e-9
    return out


def test_product_scoring_matches_an_independent_forward(setup):
    """ExactPhi.prepare's per-node log-probabilities (paged-KV forks, one forward per leaf) equal
    mlx-lm's KVCache forwards at every trie node."""
    phi, ref, trie = setup["phi"], setup["ref"], setup["trie"]
    worst = 0.0
    for n in range(len(trie)):
        row = ref[n]
        lp = row - _logsumexp(row)
        for t, v in phi.node_lp[n].items():
            worst = max(worst, abs(v - lp[t]))
    assert worst < 2e-3, worst


def test_exact_phi_from_prepare_matches_the_reference_dp(setup):
    """Φ from the product's prepare = Φ fitted on the independent logits (via the isomorphic
    compact trie), and Φ(root) is the model's probability of a valid unconstrained output."""
    phi, small = setup["phi"], ExactPhi(max_nodes=10_000)
    small.fit(setup["small_trie"], score_with_function(setup["small_trie"], setup["logits_of"]),
              grammar=setup["small_g"], vocab_size=setup["width"])
    to_small = setup["to_small"]
    for n in range(len(phi.trie)):
        m = small.trie.walk([to_small[t] for t in phi.trie.path(n)])
        assert abs(phi.log_v[n] - small.log_v[m]) < 5e-3 * max(1.0, abs(small.log_v[m]) / 10)
    assert 0 < phi.stats["phi_valid_mass"] < 1


def test_laws_differ_clearly(laws):
    gap = tv(laws["proj"], laws["star"])
    assert gap > 0.3, gap
    assert gap > 10 * tv_floor(laws["star"], N)


@pytest.fixture(scope="module")
def rows(setup):
    g = setup["small_g"]
    return Rows(setup["logits_of"], g, draft_temperature=DRAFT_T, width=setup["width"])


def _providers(setup):
    exact = ExactPhi(max_nodes=10_000).fit(setup["small_trie"], score_with_function(setup["small_trie"], setup["logits_of"]),
                                           grammar=setup["small_g"], vocab_size=setup["width"],
                                           prompt_len=len(setup["ids"]))
    return {"none": None, "exact": exact}


@pytest.mark.slow
def test_masking_samples_mu_proj_and_exact_phi_samples_mu_star(setup, laws, rows):
    phis = _providers(setup)
    prompt = tuple(setup["ids"])
    results = {}
    for name, target, other in (("none", "proj", "star"), ("exact", "star", "proj")):
        counts, acc = fvo_sample(N, setup["small_g"], rows, phis[name], gamma=4, seed=5, prompt=prompt)
        emp = empirical(counts)
        floor = tv_floor(laws[target], N)
        results[name] = (tv(emp, laws[target]), floor, tv(emp, laws[other]), acc)
        print(f"phi={name}: TV(emp, {target}) {results[name][0]:.4f} (floor {floor:.4f}), "
              f"TV(emp, {other}) {results[name][2]:.4f}, acceptance {acc:.3f}")
    for name, (to_own, floor, to_other, acc) in results.items():
        assert to_own <= floor, (name, to_own, floor)
        assert to_other > 10 * floor, (name, to_other, floor)  # the check can fail
        assert 0.05 < acc < 0.99, (name, acc)


def _equality_verify(logits, proposal, sampling, remaining, context):
    """Appendix H's biased verifier: accept a draft iff it equals an independent sample of the
    (Φ-reweighted) target; on a mismatch emit a fresh target sample. Same targets as the
    product's verifier."""
    constraint, phi, sampler = sampling.constraint, sampling.phi, sampling.sampler
    drafts = proposal.tokens
    states = [constraint.state]
    for t in drafts:
        states.append(constraint.grammar.advance(states[-1], t))
    rows = len(drafts) + 1
    logits = mx.where(mx.stack([constraint.mask(states[i]) for i in range(rows)]), logits[:rows], -mx.inf)
    if phi is not None:
        w = [phi.log_weights(context + drafts[:i], states[i], logits[i]) for i in range(rows)]
        logits = logits + mx.stack([x if x is not None else mx.zeros_like(logits[i]) for i, x in enumerate(w)])
    p = distribution(logits, sampling.params)
    for m, d in enumerate(drafts):
        if int(sampler.draw(p[m]).item()) != d:
            return m, int(sampler.draw(p[m]).item()), states
    return len(drafts), int(sampler.draw(p[len(drafts)]).item()), states


@pytest.mark.slow
def test_appendix_h_equality_verifier_fails_the_same_check(setup, laws, rows):
    n = 10_000
    counts, _ = fvo_sample(n, setup["small_g"], rows, _providers(setup)["exact"], gamma=4, seed=9,
                             prompt=tuple(setup["ids"]), verify=_equality_verify)
    got = tv(empirical(counts), laws["star"])
    floor = tv_floor(laws["star"], n)
    print(f"equality verifier: TV(emp, mu*) {got:.4f} (floor {floor:.4f})")
    assert got > 2.5 * floor, (got, floor)


def test_engine_chat_runs_each_phi_kind(engine):
    """The wiring: engine.chat(phi=...) prepares the provider, stays valid, reports its stats."""
    schema = {"enum": ["yes", "no"]}
    for kind in ("onestep", "exact"):
        r = engine.chat(PROMPT, json_schema=schema, temperature=1.0, seed=3, max_tokens=8, phi=kind)
        assert r.valid and json.loads(r.text) in ("yes", "no")
        assert r.stats["phi"] == kind
    assert r.stats["phi_trie"] == "full" and r.stats["phi_forwards"] >= 2
    assert make_phi("none") is None
    with pytest.raises(onyx.RequestError, match="token trie"):
        engine.chat(PROMPT, regex=r"[a-z]+", phi="exact", max_tokens=4)
    assert DEAD_LOG_WEIGHT < -1000
