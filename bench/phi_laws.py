"""Sampling laws over a finite token trie, and the product's speculative verifier run against
memoized logits: the ground truth and the sampler of the Φ (future-validity) test and bench.

  * `trie_laws`: μ^proj (local masking), μ^1s (OneStep) and μ* (the model conditioned on
    validity) over a trie's outputs, computed here from the logits, independently of onyx.decoding.phi;
  * `tv`, `tv_floor`, `empirical`: total variation, and the sampling floor it is judged against;
  * `Rows`, `fvo_sample`: n outputs of `onyx.decoding.verify` with a draft law q != p, round by
    round as `onyx.decoding.decode` runs them; `fvo_sample_batched`: several sequences at once,
    their rows side by side in one logits matrix per round (`verify_many`), as a batched step;
  * `reference_rows`, `build_case`: a real model's trie scored independently (mlx-lm's own KV
    cache) and moved into a compact vocabulary;
  * `tiny_vocab`, `compact_grammar`: real vocabularies over a handful of tokens, so a real
    model's trie can be sampled on rows ~30 wide instead of the model's full vocabulary.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

import onyx.cpu  # noqa: F401, I001  (OpenBLAS before mlx.core)
import mlx.core as mx

from onyx.decoding.drafts import Proposal
from onyx.decoding.phi import ExactPhi, OneStepPhi, TokenTrie, _logsumexp, score_with_function
from onyx.decoding.processors import row_sampling
from onyx.decoding.sampling import apply_mask, distribution, mask_to_mlx
from onyx.decoding.verify import prepare, verify_many
from onyx.grammar.constraint import Constraint
from onyx.options import SamplingParams

# --------------------------------------------------------------------------------------------
# Small real vocabularies
# --------------------------------------------------------------------------------------------


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



# --------------------------------------------------------------------------------------------
# A real model's trie, memoized
# --------------------------------------------------------------------------------------------


def reference_rows(model, prompt_ids: list[int], trie: TokenTrie) -> dict[int, np.ndarray]:
    """Every trie node's next-token logits through mlx-lm's KVCache (independent of Onyx's
    paged cache): prompt once, then each leaf path from its common prefix with the previous."""
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    mx.eval(model(mx.array(prompt_ids[:-1])[None], cache=cache))
    base = len(prompt_ids)
    rows: dict[int, np.ndarray] = {}
    prev = None
    for leaf in trie.leaves():
        path = trie.path(leaf)
        along = [0]
        for t in path:
            along.append(trie.children[along[-1]][t])
        if prev is None:
            feed, nodes = [prompt_ids[-1]] + path, along
        else:
            k = 0
            while k < min(len(prev), len(path)) and prev[k] == path[k]:
                k += 1
            for c in cache:
                c.trim(c.offset - (base + k))
            feed, nodes = path[k:], along[k + 1:]
        out = model(mx.array(feed)[None], cache=cache)[0].astype(mx.float32)
        out = np.asarray(out, dtype=np.float64)
        for n, row in zip(nodes, out):
            rows[n] = row
        prev = path
    return rows


def build_case(engine, prompt, schema) -> dict:
    """The product's exact-Φ preparation, the independent reference logits and the compact
    vocabulary for one (prompt, schema)."""
    ids = engine.chat_ids(prompt)
    grammar = engine.compile(json_schema=schema)
    phi = prepared_exact_phi(engine, ids, grammar)  # the product's own preparation
    trie = phi.trie
    assert phi.stats["phi_trie"] == "full" and len(trie) < 400
    ref = reference_rows(engine.loaded.model, ids, trie)
    eos = [int(e) for e in grammar.eos_token_ids]

    # The compact vocabulary: the trie's tokens (same bytes), OTHER, EOS.
    c = compact_grammar(engine, trie, schema)
    big_ids, to_small, other, small_eos, width, small_g = (c[k] for k in ("big_ids", "to_small", "other", "eos",
                                                                          "width", "grammar"))
    small_trie = TokenTrie.full(small_g, max_nodes=10_000)
    mapped = {tuple(to_small[t] for t in k) for k in trie.sequences()}
    assert set(small_trie.sequences()) == mapped, "the compact grammar must have the same token trie"

    big_index = np.array(big_ids, dtype=np.int64)
    rest = np.ones(engine.loaded.vocab_size, dtype=bool)
    rest[big_index] = False
    rest[eos] = False
    compact: dict[tuple, np.ndarray] = {}
    for n, row in ref.items():
        small = np.empty(width)
        small[:len(big_ids)] = row[big_index]
        small[other] = _logsumexp(row[rest])
        small[small_eos] = _logsumexp(row[eos])
        compact[tuple(to_small[t] for t in trie.path(n))] = small

    def logits_of(path):
        return compact[tuple(path)]

    return dict(ids=ids, grammar=grammar, phi=phi, trie=trie, ref=ref, eos=eos, small_g=small_g,
                small_trie=small_trie, width=width, logits_of=logits_of, to_small=to_small, small_eos=small_eos)


# --------------------------------------------------------------------------------------------
# Analytic laws over a full token trie
# --------------------------------------------------------------------------------------------


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

# --------------------------------------------------------------------------------------------
# The product's speculative loop on memoized logits
# --------------------------------------------------------------------------------------------


class Rows:
    """Memoized (V,) target logits and draft distributions per token prefix, for a grammar whose
    masks (`constraint`, MLX form) are `width` wide."""

    def __init__(self, logits_of, grammar, draft_temperature: float, width: int) -> None:
        self.logits_of = logits_of
        self.grammar = grammar
        self.constraint = Constraint.of(grammar, width, mask_to_mlx, "mlx")
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
            q = distribution(apply_mask(self.row(prefix), self.constraint.mask(state)),
                             SamplingParams(temperature=self.draft_t))
            qn = np.asarray(q, dtype=np.float64)
            support = np.nonzero(qn > 0)[0]
            hit = (q, support, qn[support] / qn[support].sum())
            self._q[prefix] = hit
        return hit


def verify_one(logits: mx.array, proposal: Proposal, sampling, remaining: int, context: list[int]):
    """The product's verifier for one sequence whose rows start at row 0 of `logits`."""
    return verify_many(logits, [prepare(proposal, sampling, remaining, context=context)])[0]


def _draft_round(rows: Rows, constraint: Constraint, out: list[int], gamma: int, rng, eos: set[int]) -> Proposal:
    """One round's model drafts from the draft law `rows.draft`, stopping at EOS or where only
    EOS may follow."""
    proposal = Proposal()
    s = constraint.state
    for _ in range(gamma):
        q, support, probs = rows.draft(tuple(out + proposal.tokens), s)
        t = int(support[rng.choice(len(support), p=probs)])
        proposal.add(t, q, "model")
        if t in eos:
            break
        s = constraint.grammar.advance(s, t)
        if constraint.only_eos(s):
            break
    return proposal


def _commit(constraint: Constraint, out: list[int], tokens: list[int], accepted: int, states: list, eos: set[int]) -> bool:
    """Commits a round's accepted drafts and the target's token as the engine does; True when
    the output ended (EOS, or nothing but EOS may follow)."""
    for i, token in enumerate(tokens):
        if token in eos:
            return True
        constraint.advance(token, states[i + 1] if i < accepted else None)
        out.append(token)
        if constraint.done:
            return True
    return False


def fvo_sample(n: int, grammar, rows: Rows, phi, *, gamma: int = 3, seed: int = 0, prompt: tuple = (),
               verify=None) -> tuple[Counter, float]:
    """n outputs of the product's speculative verifier (`verify_one`, or `verify` with its
    signature) against memoized logits, mirroring the engine's round structure. Returns output
    counts and the draft acceptance rate."""
    verify = verify or verify_one
    sampling = row_sampling(SamplingParams(temperature=1.0, seed=seed), rows.constraint, phi=phi)
    rng = np.random.default_rng(seed + 1)
    eos = set(grammar.eos_token_ids)
    counts: Counter = Counter()
    drafted = accepted_total = 0
    for _ in range(n):
        out: list[int] = []
        constraint = sampling.constraint = rows.constraint.fresh()
        done = False
        while not done:
            proposal = _draft_round(rows, constraint, out, gamma, rng, eos)
            drafts = proposal.tokens
            logits = mx.stack([rows.row(tuple(out + drafts[:i])) for i in range(len(drafts) + 1)])
            m, new, states = verify(logits, proposal, sampling, 1 << 20, list(prompt) + out)
            drafted += len(drafts)
            accepted_total += m
            done = _commit(constraint, out, drafts[:m] + [new], m, states, eos)
        counts[tuple(out)] += 1
    return counts, (accepted_total / drafted if drafted else 0.0)


def fvo_sample_batched(n: int, grammar, rows: Rows, arms: list[dict], *, seed: int = 0,
                       prompt: tuple = ()) -> list[tuple[Counter, float]]:
    """`fvo_sample` for several sequences at once, as a batched step runs them: each round every
    sequence proposes its drafts (`gamma` of its own), its rows are laid after the previous
    sequence's in one logits matrix, and one `verify_many` call verifies all of them. A sequence
    that ends starts its next output at once, so sequences at different depths share each round.
    `arms`: per sequence {"phi": provider or None, "gamma": int, "seed": int}. Returns per arm
    n output counts and its draft acceptance rate."""
    samplings = [row_sampling(SamplingParams(temperature=1.0, seed=a["seed"]), rows.constraint.fresh(), phi=a["phi"])
                 for a in arms]
    rng = np.random.default_rng(seed)
    eos = set(grammar.eos_token_ids)
    counts = [Counter() for _ in arms]
    outs: list[list[int]] = [[] for _ in arms]
    drafted, accepted = [0] * len(arms), [0] * len(arms)
    while any(sum(c.values()) < n for c in counts):
        checks, stacked, offset = [], [], 0
        for i, arm in enumerate(arms):
            proposal = _draft_round(rows, samplings[i].constraint, outs[i], arm["gamma"], rng, eos)
            drafts = proposal.tokens
            stacked += [rows.row(tuple(outs[i] + drafts[:j])) for j in range(len(drafts) + 1)]
            checks.append(prepare(proposal, samplings[i], 1 << 20, offset=offset, context=list(prompt) + outs[i]))
            offset += len(drafts) + 1
        results = verify_many(mx.stack(stacked), checks)
        for i, (check, (m, new, walk)) in enumerate(zip(checks, results)):
            drafts = check.proposal.tokens
            drafted[i] += len(drafts)
            accepted[i] += m
            if _commit(samplings[i].constraint, outs[i], drafts[:m] + [new], m, walk, eos):
                if sum(counts[i].values()) < n:
                    counts[i][tuple(outs[i])] += 1
                outs[i] = []
                samplings[i].constraint = rows.constraint.fresh()
    return [(c, a / d if d else 0.0) for c, a, d in zip(counts, accepted, drafted)]


def providers(grammar, trie, logits_of, width: int, prompt_len: int = 0):
    params = SamplingParams(temperature=1.0)
    exact = ExactPhi(max_nodes=100_000).fit(trie, score_with_function(trie, logits_of), grammar=grammar,
                                            vocab_size=width, temperature=1.0, prompt_len=prompt_len)
    onestep = OneStepPhi().configure(grammar, width, params)
    return {"uniform": None, "onestep": onestep, "exact": exact}

