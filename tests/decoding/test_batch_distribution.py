"""At temperature > 0 a sequence's law does not depend on what is batched beside it.

The Φ distribution test's case (real SmolLM2 logits over the token trie of {"enum": ["ok",
"okay", "failed"]}, memoized in a compact vocabulary that keeps every probability exactly; see
tests/decoding/test_phi_distribution.py) is sampled by three sequences at once, as a batched step
runs them: each round their rows lie one after the other in one logits matrix and a single
`verify_many` call verifies all three (Leviathan accept/reject with residual resampling, a
draft law q != p). The sequences differ in what they ask for (masking alone, exact Φ, another
draft count) and restart as soon as they end, so sequences at different depths share every
round. Each one's empirical law over 20,000 outputs must be within the sampling floor of its
own target (μ^proj, or μ* with exact Φ), and far from the other law (the check can fail).
"""

from __future__ import annotations

import pytest

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)

from bench.phi_laws import Rows, build_case, empirical, fvo_sample_batched, trie_laws, tv, tv_floor
from onyx.decoding.phi import ExactPhi, score_with_function

PROMPT = [{"role": "user", "content": "What is the status of the job?"}]
SCHEMA = {"enum": ["ok", "okay", "failed"]}
N = 20_000


@pytest.fixture(scope="module")
def case(engine):
    c = build_case(engine, PROMPT, SCHEMA)
    c["laws"] = trie_laws(c["small_trie"], c["logits_of"], [c["small_eos"]])
    return c


@pytest.mark.slow
def test_each_row_keeps_its_law_beside_other_requests(case):
    g = case["small_g"]
    rows = Rows(case["logits_of"], g, draft_temperature=0.5, width=case["width"])
    exact = ExactPhi(max_nodes=10_000).fit(case["small_trie"], score_with_function(case["small_trie"], case["logits_of"]),
                                           grammar=g, vocab_size=case["width"], prompt_len=len(case["ids"]))
    arms = [{"phi": None, "gamma": 4, "seed": 11, "law": "proj", "other": "star"},
            {"phi": exact, "gamma": 4, "seed": 12, "law": "star", "other": "proj"},
            {"phi": None, "gamma": 1, "seed": 13, "law": "proj", "other": "star"}]
    results = fvo_sample_batched(N, g, rows, arms, seed=3, prompt=tuple(case["ids"]))
    laws = case["laws"]
    for arm, (counts, acceptance) in zip(arms, results):
        emp = empirical(counts)
        floor = tv_floor(laws[arm["law"]], N)
        own, other = tv(emp, laws[arm["law"]]), tv(emp, laws[arm["other"]])
        print(f"gamma {arm['gamma']} {arm['law']}: TV(emp, own) {own:.4f} (floor {floor:.4f}), "
              f"TV(emp, other) {other:.4f}, acceptance {acceptance:.3f}")
        assert sum(counts.values()) == N
        assert own <= floor, (arm["law"], own, floor)
        assert other > 10 * floor, (arm["law"], other, floor)
        assert 0.05 < acceptance < 0.99, acceptance
