"""Future-validity (Φ) reweighting: make the speculative verifier target the model's law
*conditioned on validity* instead of the locally masked law.

Two target laws over the outputs w of a constrained request (w followed by EOS):

* μ^proj (what plain masking samples): at each step the model's next-token distribution p_t,
  restricted to the grammar's allowed set A_t and renormalised; a string's probability is the
  product of those masked conditionals.
* μ* (the model's own law given validity): μ*(w) = p(w · EOS) / Z over the language, with
  Z = Σ_w p(w · EOS) the probability that *unconstrained* sampling produces a valid output.

They differ whenever some allowed tokens lead to futures the model rarely completes validly.
With Φ_t(y) = Pr_p[a valid completion | prefix · y] ("future validity"), μ*'s next-token
kernel is p_t(y)·Φ_t(y) normalised over A_t (a Doob h-transform of p with h = Φ); masking is
the special case Φ ≡ 1. The decoding loop (`onyx.decoding.verify`) adds `log_weights(...)` to the
masked logits of every verified row before temperature etc., so Leviathan accept/reject and the
residual resampling run against p·Φ, and the committed tokens follow μ* when Φ is exact.

Providers (`make_phi(kind)`; a fresh object per request):

* `ExactPhi` ("exact"): for finite languages. `prepare` enumerates the language's token trie
  from the grammar, scores every trie prefix with the target model reusing the prompt's KV, and
  runs a backward DP: V(n) = Σ_{eos} p_n(eos)·[n accepting] + Σ_{child c by token y} p_n(y)·V(c)
  is the probability that sampling from prefix n ends validly, and Φ(n, y) = V(child), Φ(n, EOS)
  = 1. Scoring is one multi-token forward per trie leaf: the leaves are visited depth-first, the
  KV (a private fork of the prompt's sequence) is rolled back in O(1) to the longest common
  prefix with the previous leaf's path, and the rest of the path is run as one forward whose
  rows are the logits of every new node on it. Every trie edge is run exactly once (tokens fed =
  trie nodes + the pending prompt token), forwards = leaves. Trie modes: "full" (every token
  sequence the grammar allows: exact for the grammar's language) when it has at most
  `max_nodes` nodes; otherwise "canonical" (each string of the language, enumerated over
  single-byte tokens, in the tokenizer's own tokenization; other tokenizations get Φ = 0, so the
  target is μ* of the canonical-token language; `phi_tv_bound` in the stats is a rigorous bound
  on its total variation to the full-grammar μ*, counting every grammar-allowed token the trie
  leaves out as if it always completed validly, hence vacuous when the model rarely produces
  valid output unconstrained). A language that is infinite or has more than `max_nodes` trie
  nodes either way raises `PhiTooLargeError` (an `onyx.RequestError`); `tokenizations="full"`
  refuses the canonical fallback. A tight `max_tokens` budget (masks that cut the language) is
  not part of Φ.
* `OneStepPhi` ("onestep"): definition 9 of the Φ paper, reusing the row's logits (no extra
  forward): Φ̂_t(y) = Σ_{u ∈ A_{t+1}(x_<t · y)} p_t(u), where p_t is the model's unmasked
  next-token distribution *at the current position* (a stand-in for p(· | x_<t · y), which would
  need another forward) and A_{t+1}(x_<t · y) is the set the grammar allows after y (EOS
  included when x_<t · y is accepting). Φ̂(EOS) = 1: after EOS the output is complete and valid.
  Tokens are grouped by the grammar state they lead to, so a row costs one masked log-sum-exp
  per distinct next state.

Temperature: with temperature T the loop samples the tempered model p_T ∝ p^{1/T}; Φ is computed
under p_T and returned as T·log Φ (the loop adds it before dividing by T), so the target is
p_T·Φ_T, i.e. the tempered model conditioned on validity. Greedy decoding uses T = 1 (the argmax
of p·Φ). top-k / top-p / min-p truncate after the reweighting; only with them off is the law
exactly μ*. Tokens with Φ = 0 get a weight of -1e4 rather than -inf: exp of it is exactly 0 in
float32 at every allowed temperature, but a row whose mask allows only such tokens (a tight
`max_tokens` budget) falls back to plain masking instead of becoming NaN.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

import onyx._grammar as _g
from onyx.errors import PhiError, PhiTooLargeError

__all__ = ["PhiError", "PhiTooLargeError", "TokenTrie", "ExactPhi", "OneStepPhi", "make_phi", "DEAD_LOG_WEIGHT"]

DEAD_LOG_WEIGHT = -1.0e4  # log-weight of a token with Φ = 0 (see the module docstring)
DEFAULT_MAX_NODES = 2000


def make_phi(kind: str, **options):
    """The Φ provider for `phi=`: None for "none", else a fresh `OneStepPhi` / `ExactPhi`
    (options go to its constructor)."""
    if kind in (None, "none"):
        return None
    if kind == "onestep":
        return OneStepPhi(**options)
    if kind == "exact":
        return ExactPhi(**options)
    raise PhiError(f"phi must be 'none', 'onestep' or 'exact', got {kind!r}")


def _effective_temperature(params) -> float:
    t = getattr(params, "temperature", 1.0)
    return 1.0 if (t is None or t == 0.0) else float(t)


# ------------------------------------------------------------------------------------------------
# Token tries
# ------------------------------------------------------------------------------------------------

@dataclass
class TokenTrie:
    """The token sequences of a finite language as a prefix tree. Node 0 is the empty prefix;
    a child is always numbered after its parent. `accepting[n]`: the output may end (EOS) after
    node n's path."""

    mode: str
    token: list[int] = field(default_factory=lambda: [-1])
    parent: list[int] = field(default_factory=lambda: [-1])
    depth: list[int] = field(default_factory=lambda: [0])
    state: list[int] = field(default_factory=list)
    accepting: list[bool] = field(default_factory=lambda: [False])
    children: list[dict[int, int]] = field(default_factory=lambda: [{}])

    def __len__(self) -> int:
        return len(self.token)

    def _add(self, parent: int, token: int, state: int) -> int:
        n = len(self.token)
        self.token.append(token)
        self.parent.append(parent)
        self.depth.append(self.depth[parent] + 1)
        self.state.append(state)
        self.accepting.append(False)
        self.children.append({})
        self.children[parent][token] = n
        return n

    def walk(self, tokens: Iterable[int], node: int = 0) -> int | None:
        """The node of a token path (from `node`), or None when it leaves the trie."""
        for t in tokens:
            node = self.children[node].get(t)
            if node is None:
                return None
        return node

    def path(self, node: int) -> list[int]:
        out = []
        while node > 0:
            out.append(self.token[node])
            node = self.parent[node]
        return out[::-1]

    def leaves(self) -> list[int]:
        """Nodes without children, depth-first (children in token order)."""
        out, stack = [], [0]
        while stack:
            n = stack.pop()
            kids = self.children[n]
            if not kids:
                out.append(n)
            else:
                stack.extend(kids[t] for t in sorted(kids, reverse=True))
        return out

    def sequences(self) -> list[tuple[int, ...]]:
        """Every complete output (accepting node), as a token tuple."""
        return [tuple(self.path(n)) for n in range(len(self)) if self.accepting[n]]

    @classmethod
    def full(cls, grammar, max_nodes: int = DEFAULT_MAX_NODES) -> "TokenTrie":
        """Every token sequence the grammar allows (walking `grammar.transitions`)."""
        trie = cls("full", state=[grammar.initial_state])
        trie.accepting[0] = bool(grammar.is_accepting(grammar.initial_state))
        stack = [0]
        while stack:
            n = stack.pop()
            toks, nxt = grammar.transitions(trie.state[n])
            if len(trie) + len(toks) > max_nodes:
                raise PhiTooLargeError(
                    f"exact Φ: the language's token trie has more than {max_nodes} nodes (every "
                    f"tokenization of every string counts; an unbounded pattern makes it infinite)")
            for t, s in zip(toks.tolist(), nxt.tolist()):
                c = trie._add(n, t, s)
                trie.accepting[c] = bool(grammar.is_accepting(s))
                stack.append(c)
        return trie

    @classmethod
    def from_sequences(cls, grammar, sequences: Iterable[Iterable[int]], mode: str = "sequences",
                       max_nodes: int = DEFAULT_MAX_NODES) -> "TokenTrie":
        """The trie of the given token sequences (each must be a complete output of `grammar`)."""
        trie = cls(mode, state=[grammar.initial_state])
        for seq in sequences:
            n = 0
            for t in seq:
                c = trie.children[n].get(t)
                if c is None:
                    try:
                        s = grammar.advance(trie.state[n], t)
                    except _g.GrammarError as e:
                        raise PhiError(f"exact Φ: token sequence {list(seq)} leaves the grammar: {e}") from None
                    c = trie._add(n, t, s)
                    if len(trie) > max_nodes:
                        raise PhiTooLargeError(f"exact Φ: the token trie has more than {max_nodes} nodes")
                n = c
            if not grammar.is_accepting(trie.state[n]):
                raise PhiError(f"exact Φ: token sequence {list(seq)} is not a complete output")
            trie.accepting[n] = True
        return trie

    @classmethod
    def canonical(cls, grammar, vocab, encode: Callable[[str], list[int]], max_nodes: int = DEFAULT_MAX_NODES,
                  max_strings: int = 20000) -> "TokenTrie":
        """Each string of the (finite) language, in its canonical tokenization `encode(text)`.
        The strings are enumerated by walking the grammar over single-byte tokens."""
        strings = enumerate_strings(grammar, vocab, max_strings=max_strings)
        seqs = []
        for b in strings:
            try:
                text = b.decode("utf-8")
            except UnicodeDecodeError:
                raise PhiError(f"exact Φ: the language contains a string that is not UTF-8: {b!r}") from None
            seqs.append(list(encode(text)))
        return cls.from_sequences(grammar, seqs, mode="canonical", max_nodes=max_nodes)


def single_byte_tokens(vocab) -> dict[int, int]:
    """token id -> byte, for the vocabulary's single-byte tokens (the first id per byte)."""
    out: dict[int, int] = {}
    seen = set()
    for i in range(vocab.size):
        if vocab.is_special(i):
            continue
        b = vocab.token_bytes(i)
        if len(b) == 1 and b[0] not in seen:
            seen.add(b[0])
            out[i] = b[0]
    return out


def enumerate_strings(grammar, vocab, *, max_strings: int = 20000, max_states: int = 100000) -> list[bytes]:
    """The strings of a finite language: the byte-level automaton is read through single-byte
    tokens, checked acyclic (else the language is infinite), its strings counted, then listed."""
    byte_of = _byte_map(vocab)
    ids = np.fromiter(byte_of.keys(), dtype=np.int64)
    edges: dict[int, list[tuple[int, int]]] = {}
    todo = [grammar.initial_state]
    while todo:
        s = todo.pop()
        if s in edges:
            continue
        if len(edges) >= max_states:
            raise PhiTooLargeError(f"exact Φ: more than {max_states} grammar states to enumerate")
        toks, nxt = grammar.transitions(s)
        out = []
        if len(toks):
            hit = np.isin(toks, ids)
            if not hit.any():
                raise PhiError("exact Φ: the vocabulary has no single-byte token for a byte the language "
                               "needs; cannot enumerate its strings")
            out = [(byte_of[t], n) for t, n in zip(toks[hit].tolist(), nxt[hit].tolist())]
        edges[s] = out
        todo.extend(n for _, n in out if n not in edges)
    # Acyclic? (every reachable state can still accept, so a cycle means infinitely many strings)
    color: dict[int, int] = {}
    order: list[int] = []  # post-order: successors first
    for root in edges:
        if root in color:
            continue
        stack = [(root, iter(edges[root]))]
        color[root] = 1
        while stack:
            s, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[s] = 2
                order.append(s)
                stack.pop()
                continue
            n = nxt[1]
            c = color.get(n, 0)
            if c == 1:
                raise PhiTooLargeError("exact Φ: the language is infinite (the grammar loops)")
            if c == 0:
                color[n] = 1
                stack.append((n, iter(edges[n])))
    count: dict[int, int] = {}
    for s in order:
        # capped just past the limit: an uncapped count can grow to thousands of digits
        count[s] = min(max_strings + 1, int(bool(grammar.is_accepting(s))) + sum(count[n] for _, n in edges[s]))
    if count[grammar.initial_state] > max_strings:
        raise PhiTooLargeError(f"exact Φ: the language has more than {max_strings} strings")
    strings: list[bytes] = []
    stack2 = [(grammar.initial_state, b"")]
    while stack2:
        s, text = stack2.pop()
        if grammar.is_accepting(s):
            strings.append(text)
        for b, n in edges[s]:
            stack2.append((n, text + bytes([b])))
    return strings


_BYTE_MAPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _byte_map(vocab) -> dict[int, int]:
    try:
        hit = _BYTE_MAPS.get(vocab)
    except TypeError:
        return single_byte_tokens(vocab)
    if hit is None:
        hit = single_byte_tokens(vocab)
        _BYTE_MAPS[vocab] = hit
    return hit


# ------------------------------------------------------------------------------------------------
# Scoring the trie with the target model
# ------------------------------------------------------------------------------------------------

def score_trie(runner, seq, pending: int, trie: TokenTrie) -> Iterator[tuple[list[int], np.ndarray]]:
    """Yields (node ids, float32 logits rows) until every trie node has its next-token logits
    given the prompt. `seq` holds the prompt's KV except its last token `pending`; it is not
    modified (the work runs on a copy-on-write fork). One forward per leaf, depth-first: the fork
    is rolled back to the common prefix with the previous leaf and the rest of the path is run at
    once (the first forward also runs `pending`, whose row is the root's)."""
    import mlx.core as mx

    work = seq.fork()
    try:
        base = work.length + 1  # KV length once `pending` is in
        prev: list[int] | None = None
        for leaf in trie.leaves():
            path = trie.path(leaf)
            along = [0]  # the node at each depth of the path
            for t in path:
                along.append(trie.children[along[-1]][t])
            if prev is None:
                feed, nodes = [pending] + path, along  # row 0 (the pending token) is the root's
            else:
                k = 0
                while k < min(len(prev), len(path)) and prev[k] == path[k]:
                    k += 1
                work.rollback(work.length - (base + k))  # keep the KV of prompt + path[:k]
                feed, nodes = path[k:], along[k + 1:]
            logits = runner.logits(mx.array(feed), work)
            mx.eval(logits)
            yield nodes, np.asarray(logits, dtype=np.float32)
            prev = path
    finally:
        work.free()


def score_with_function(trie: TokenTrie, logits_of: Callable[[list[int]], np.ndarray]
                        ) -> Iterator[tuple[list[int], np.ndarray]]:
    """The same stream from any next-token function of the token path (toy models, tests)."""
    for n in range(len(trie)):
        yield [n], np.asarray(logits_of(trie.path(n)), dtype=np.float64)[None]


def _logsumexp(x: np.ndarray) -> float:
    if x.size == 0:
        return -np.inf
    m = np.max(x)
    if not np.isfinite(m):
        return float(m)
    return float(m + np.log(np.sum(np.exp(x - m))))


# ------------------------------------------------------------------------------------------------
# Exact Φ
# ------------------------------------------------------------------------------------------------

class ExactPhi:
    """Exact future validity over a finite language's token trie (see the module docstring).

    After `prepare` (or `fit`): `trie`, `log_v[n]` (log probability that sampling from node n's
    prefix ends in a valid output, under the tempered model), `node_lp[n]` (tempered next-token
    log-probabilities at node n for its children, EOS and grandchildren tokens) and `stats`."""

    def __init__(self, max_nodes: int = DEFAULT_MAX_NODES, tokenizations: str = "auto", vocab=None) -> None:
        if tokenizations not in ("auto", "full", "canonical"):
            raise PhiError(f"tokenizations must be 'auto', 'full' or 'canonical', got {tokenizations!r}")
        self.max_nodes = max_nodes
        self.tokenizations = tokenizations
        self.vocab = vocab
        self.trie: TokenTrie | None = None
        self.stats: dict = {}
        self._dense: dict[int, object] = {}
        self._where: dict[tuple, int | None] = {}

    # -- the decode hook -------------------------------------------------------------------------

    def prepare(self, runner, seq, context: list[int], grammar, params) -> None:
        t0 = time.perf_counter()
        loaded = runner.loaded
        trie = self.build_trie(grammar, loaded)
        self.fit(trie, score_trie(runner, seq, context[-1], trie), grammar=grammar,
                 vocab_size=loaded.vocab_size, temperature=_effective_temperature(params),
                 prompt_len=len(context))
        self.stats["phi_prepare_s"] = round(time.perf_counter() - t0, 6)

    def build_trie(self, grammar, loaded=None) -> TokenTrie:
        if self.tokenizations in ("auto", "full"):
            try:
                return TokenTrie.full(grammar, self.max_nodes)
            except PhiTooLargeError:
                if self.tokenizations == "full":
                    raise
        if loaded is None and self.vocab is None:
            raise PhiError("exact Φ: a canonical trie needs the model's tokenizer")
        vocab = self.vocab if self.vocab is not None else loaded.vocabulary
        encode = (lambda text: list(loaded.tokenizer.encode(text, add_special_tokens=False))) if loaded is not None \
            else None
        try:
            return TokenTrie.canonical(grammar, vocab, encode, self.max_nodes)
        except PhiTooLargeError as e:
            raise PhiTooLargeError(f"{e}; exact Φ needs a finite language whose token trie fits "
                                   f"(max_nodes={self.max_nodes})") from None

    def log_weights(self, context: list[int], state: int, masked_logits_row, raw_logits_row=None):
        """T·log Φ for every next token (a (V,) array), or None off the trie."""
        node = self.node_of(context)
        if node is None:
            return None
        w = self._dense.get(node)
        if w is None:
            import mlx.core as mx

            w = mx.array(self.log_phi_row(node) * self.temperature, dtype=mx.float32)
            self._dense[node] = w
        return w

    # -- the computation -------------------------------------------------------------------------

    def fit(self, trie: TokenTrie, rows: Iterable[tuple[list[int], np.ndarray]], *, grammar, vocab_size: int,
            temperature: float = 1.0, prompt_len: int = 0) -> "ExactPhi":
        """Φ for every trie node from its next-token logits (`rows`: (node ids, logits) batches
        covering every node, e.g. `score_trie` or `score_with_function`)."""
        t0 = time.perf_counter()
        self.trie, self.grammar, self.vocab_size = trie, grammar, vocab_size
        self.temperature, self.prompt_len = float(temperature), prompt_len
        self.eos = [int(e) for e in grammar.eos_token_ids if e < vocab_size]
        n_nodes = len(trie)
        lp: list[dict[int, float] | None] = [None] * n_nodes
        excluded = np.full(n_nodes, -np.inf)  # log mass of allowed tokens the trie leaves out
        forwards = 0
        for nodes, block in rows:
            forwards += 1
            z = np.asarray(block, dtype=np.float64) / self.temperature
            for n, row in zip(nodes, z):
                lse = _logsumexp(row)
                want = set(trie.children[n]) | set(self.eos)
                for c in trie.children[n].values():
                    want.update(trie.children[c])
                idx = np.fromiter(want, dtype=np.int64)
                lp[n] = dict(zip(idx.tolist(), (row[idx] - lse).tolist()))
                if trie.mode != "full":
                    allowed = np.asarray(grammar.allowed_token_ids(trie.state[n]), dtype=np.int64)
                    keep = set(trie.children[n]) | (set(self.eos) if trie.accepting[n] else set())
                    out = allowed[~np.isin(allowed, np.fromiter(keep, dtype=np.int64, count=len(keep)))]
                    excluded[n] = _logsumexp(row[out]) - lse
        missing = [n for n in range(n_nodes) if lp[n] is None]
        if missing:
            raise PhiError(f"exact Φ: {len(missing)} trie nodes were not scored")
        self.node_lp = lp
        # Backward DP (children are numbered after their parents).
        log_v = np.full(n_nodes, -np.inf)
        for n in range(n_nodes - 1, -1, -1):
            terms = [lp[n][e] for e in self.eos] if trie.accepting[n] else []
            terms += [lp[n][t] + log_v[c] for t, c in trie.children[n].items()]
            log_v[n] = _logsumexp(np.asarray(terms, dtype=np.float64))
        self.log_v = log_v
        # Forward path probabilities, for the mass a canonical trie leaves out.
        bound = 0.0
        if trie.mode != "full":
            log_p = np.zeros(n_nodes)
            for n in range(1, n_nodes):
                log_p[n] = log_p[trie.parent[n]] + lp[trie.parent[n]][trie.token[n]]
            bound = float(np.sum(np.exp(log_p + excluded)))
        z = float(np.exp(log_v[0]))
        self.stats = {
            "phi": "exact",
            "phi_trie": trie.mode,
            "phi_trie_nodes": n_nodes,
            "phi_trie_outputs": int(sum(trie.accepting)),
            "phi_forwards": forwards,
            "phi_valid_mass": z,  # Pr[unconstrained sampling gives a valid output] (tempered model)
            "phi_tv_bound": (bound / (z + bound)) if bound > 0 else 0.0,
            "phi_fit_s": round(time.perf_counter() - t0, 6),
        }
        self._dense.clear()
        self._where.clear()
        return self

    def node_of(self, context: list[int]) -> int | None:
        key = tuple(context[self.prompt_len:])
        if key in self._where:
            return self._where[key]
        node = self.trie.walk(key)
        if len(self._where) > 4096:
            self._where.clear()
        self._where[key] = node
        return node

    def log_phi(self, node: int) -> dict[int, float]:
        """log Φ(node, y) for the tokens y with Φ > 0 (children and, if accepting, EOS)."""
        out = {t: float(self.log_v[c]) for t, c in self.trie.children[node].items()}
        if self.trie.accepting[node]:
            out.update({e: 0.0 for e in self.eos})
        return out

    def log_phi_row(self, node: int) -> np.ndarray:
        row = np.full(self.vocab_size, DEAD_LOG_WEIGHT, dtype=np.float64)
        for t, v in self.log_phi(node).items():
            row[t] = max(v, DEAD_LOG_WEIGHT)
        return row

    def law(self) -> dict[tuple[int, ...], float]:
        """μ* over the trie's outputs: p(w · EOS) / Σ (what the reweighted sampler draws)."""
        trie, lp = self.trie, self.node_lp
        out = {}
        for n in range(len(trie)):
            if trie.accepting[n]:
                logp, m = 0.0, n
                while m > 0:
                    logp += lp[trie.parent[m]][trie.token[m]]
                    m = trie.parent[m]
                out[tuple(trie.path(n))] = float(np.exp(logp + _logsumexp(np.asarray([lp[n][e] for e in self.eos]))
                                                        - self.log_v[0]))
        return out


# ------------------------------------------------------------------------------------------------
# OneStep Φ (definition 9)
# ------------------------------------------------------------------------------------------------

class OneStepPhi:
    """Φ̂_t(y) = Σ_{u ∈ A_{t+1}(x_<t · y)} p_t(u) from the current row's unmasked logits (see the
    module docstring). Needs the raw row (the loop passes it as `raw_logits_row`); given only
    the masked row it would sum p_t over A_t ∩ A_{t+1}, which is not the definition."""

    def __init__(self) -> None:
        self._plans: dict[int, tuple] = {}
        self.stats: dict = {"phi": "onestep"}

    def prepare(self, runner, seq, context: list[int], grammar, params) -> None:
        self.grammar = grammar
        self.vocab_size = runner.loaded.vocab_size
        self.configure(grammar, runner.loaded.vocab_size, params)

    def configure(self, grammar, vocab_size: int, params) -> "OneStepPhi":
        self.grammar, self.vocab_size = grammar, vocab_size
        self.temperature = _effective_temperature(params)
        self.eos = [int(e) for e in grammar.eos_token_ids if e < vocab_size]
        self._plans.clear()
        return self

    def _plan(self, state: int):
        """For a state: the distinct next states' masks (K, V) and each token's index into them
        (K = not allowed, K + 1 = EOS)."""
        plan = self._plans.get(state)
        if plan is None:
            import mlx.core as mx

            from onyx.decoding.sampling import mask_to_mlx

            g, V = self.grammar, self.vocab_size
            toks, nxt = g.transitions(state)
            uniq, inv = np.unique(np.asarray(nxt), return_inverse=True)
            K = len(uniq)
            index = np.full(V, K, dtype=np.int32)
            index[np.asarray(toks, dtype=np.int64)] = inv.astype(np.int32)
            if g.is_accepting(state):
                index[self.eos] = K + 1
            masks = mx.stack([mask_to_mlx(g.token_bitmask(int(s)), V) for s in uniq]) if K else None
            plan = (masks, mx.array(index), K)
            self._plans[state] = plan
        return plan

    def log_weights(self, context: list[int], state: int, masked_logits_row, raw_logits_row=None):
        import mlx.core as mx

        row = raw_logits_row if raw_logits_row is not None else masked_logits_row
        masks, index, K = self._plan(state)
        T = self.temperature
        z = row.astype(mx.float32) / T
        lse = mx.logsumexp(z)
        if K:
            per_state = mx.logsumexp(mx.where(masks, z[None, :], -mx.inf), axis=-1) - lse
            per_state = mx.maximum(per_state, DEAD_LOG_WEIGHT / T)
        else:
            per_state = mx.zeros((0,), dtype=mx.float32)
        vals = mx.concatenate([per_state, mx.array([DEAD_LOG_WEIGHT / T, 0.0], dtype=mx.float32)])
        return vals[index] * T
