"""The paged KV cache (onyx/kv/pool.py) against mlx-lm's models and caches.

Small randomly initialised mlx-lm models (`kv_models.py`: llama, qwen2, gemma3_text with
sliding-window layers) make these cheap; block_size is small so that every test crosses block
boundaries. One test runs the real default model (onyx.models.loader.load()).
"""

from __future__ import annotations

import random

import pytest

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)
from onyx.chat.setup import chat_ids
from onyx.kv import pool as kv_pool
from onyx.kv import sequence as kv_sequence
from onyx.kv.pool import CacheFullError, PagedKVPool
from onyx.models import loader as models

import mlx.core as mx  # noqa: E402
from kv_models import (ATOL, ATOL_FULL, VOCAB, cached_prefix, close, full_logits, gemma, make_gemma3, make_llama,  # noqa: F401
                       make_qwen2, model, run, tiny, tokens)
from mlx_lm.models.cache import (  # noqa: E402
    can_trim_prompt_cache,
    make_prompt_cache,
    trim_prompt_cache,
)

# -- shape inference --------------------------------------------------------------------------------

def test_for_model_reads_shapes_and_windows(tiny, gemma):
    pool = PagedKVPool.for_model(tiny)
    assert pool.num_layers == 3 and pool.kv_heads == [2] * 3 and pool.head_dims == [16] * 3
    assert pool.windows == [None] * 3
    g = PagedKVPool.for_model(gemma)
    assert g.kv_heads == [1] * 4 and g.head_dims == [16] * 4
    assert g.windows == [6, None, 6, None]  # sliding_window_pattern=2: every 2nd layer is global
    q = PagedKVPool.for_model(make_qwen2())
    assert q.head_dims == [16, 16]  # qwen2's attention has no head_dim attribute: from k_proj


# -- equivalence with a full forward and with mlx-lm's cache -----------------------------------------

def test_chunked_prefill_and_decode_match_full_forward(model):
    """Random chunk sizes (single-block slice writes and multi-block scatters), a pool that starts
    with one block and has to grow: every position's logits equal the uncached forward."""
    toks = tokens(60, seed=1)
    ref = full_logits(model, toks)
    pool = PagedKVPool.for_model(model, block_size=4, num_blocks=1)
    seq = pool.sequence()
    rng = random.Random(2)
    i, outs = 0, []
    while i < len(toks):
        n = rng.choice([1, 1, 1, 2, 3, 5, 9])
        outs.append(run(model, seq, toks[i:i + n]))
        i += n
    assert close(mx.concatenate(outs), ref, ATOL_FULL)
    assert seq.length == 60 and len(seq.block_table) == 15
    assert pool.stats()["grows"] > 0
    seq.free()
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks


def test_decode_matches_mlx_lm_cache(model):
    """One token per step, as in generation: same logits as mlx-lm's own caches (KVCache and, for
    sliding-window layers, RotatingKVCache), well past the sliding window."""
    toks = tokens(40, seed=3)
    pool = PagedKVPool.for_model(model, block_size=4, num_blocks=4)
    seq = pool.sequence()
    ref_cache = make_prompt_cache(model)
    a = run(model, seq, toks[:7])
    b = model(mx.array(toks[:7])[None], cache=ref_cache)[0]
    assert close(a, b, ATOL)
    for t in toks[7:]:
        a = run(model, seq, [t])
        b = model(mx.array([t])[None], cache=ref_cache)[0]
        assert close(a, b, ATOL)
    seq.free()


def test_mlx_lm_trim_interface(tiny):
    pool = PagedKVPool.for_model(tiny, block_size=4)
    seq = pool.sequence()
    caches = seq.layer_caches()
    run(tiny, seq, tokens(10))
    assert can_trim_prompt_cache(caches)
    used = pool.num_used_blocks
    assert trim_prompt_cache(caches, 5) == 5
    assert seq.length == 5 and all(c.offset == 5 for c in caches)
    assert pool.num_used_blocks == used - 1  # 10 -> 5 tokens: 3 blocks -> 2
    seq.free()


def test_runs_inside_mlx_lm_generate_step(model):
    """mlx-lm's own generation loop (chunked prefill evaluating ``cache.state``, async decode)
    with the paged caches as its prompt_cache: same tokens as with its own caches."""
    from mlx_lm.generate import generate_step

    prompt = mx.array(tokens(23, seed=14))

    def gen(cache):
        steps = generate_step(prompt, model, max_tokens=20, prompt_cache=cache, prefill_step_size=5)
        return [int(t) for t, _ in steps]

    pool = PagedKVPool.for_model(model, block_size=4)
    seq = pool.sequence()
    assert gen(seq.layer_caches()) == gen(make_prompt_cache(model))
    assert seq.length >= 23 + 19  # (generate_step runs one step ahead)
    seq.free()


def test_make_mask_matches_mlx_lm_semantics(gemma):
    from mlx_lm.models.base import create_causal_mask

    pool = PagedKVPool.for_model(gemma, block_size=4)
    seq = pool.sequence()
    run(gemma, seq, tokens(9))
    sliding, full = seq.layer_caches()[0], seq.layer_caches()[1]
    assert (sliding.window, full.window) == (6, None)
    # full attention: None for one query, "causal" or the explicit array for several
    assert full.make_mask(1) is None
    assert full.make_mask(3) == "causal"
    assert mx.array_equal(full.make_mask(3, return_array=True), create_causal_mask(3, 9)).item()
    # sliding window: the layer returns only the keys the window needs (from 9 - 6 + 1 = 4 on),
    # and the mask is mlx-lm's windowed causal mask restricted to those keys
    assert sliding.make_mask(1, window_size=6) is None
    expect = create_causal_mask(3, 9, window_size=6)[:, 4:]
    assert mx.array_equal(sliding.make_mask(3, window_size=6), expect).item()
    k, _ = sliding.update_and_fetch(mx.zeros((1, 1, 3, 16)), mx.zeros((1, 1, 3, 16)))
    assert k.shape[2] == 12 - 4
    with pytest.raises(ValueError):
        sliding.make_mask(3, window_size=8)  # wider than what the layer keeps for attention
    seq.free()


# -- rollback ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3, 4, 9])
@pytest.mark.parametrize("which", ["llama", "gemma3"])
def test_rollback_then_reappend_equals_never_appended(which, k, tiny, gemma):
    model = {"llama": tiny, "gemma3": gemma}[which]
    prompt, drafted, real = tokens(13, seed=4), tokens(k, seed=5), tokens(12, seed=6)
    pool = PagedKVPool.for_model(model, block_size=4, num_blocks=4)

    a = pool.sequence()
    run(model, a, prompt)
    for t in drafted:  # speculative tokens, one at a time
        run(model, a, [t])
    assert a.rollback(k) == k and a.length == len(prompt)
    out_a = [run(model, a, real[:3])] + [run(model, a, [t]) for t in real[3:]]

    b = pool.sequence()
    run(model, b, prompt)
    out_b = [run(model, b, real[:3])] + [run(model, b, [t]) for t in real[3:]]
    assert close(mx.concatenate(out_a), mx.concatenate(out_b), ATOL)
    assert a.block_table != b.block_table and len(a.block_table) == len(b.block_table)
    a.free()
    b.free()
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks


class _Untouchable:
    """Stands in for arrays and for the mlx.core module: any use raises."""

    def __getattr__(self, name):
        raise AssertionError(f"rollback touched an array ({name})")

    def __getitem__(self, key):
        raise AssertionError("rollback indexed an array")

    def __setitem__(self, key, value):
        raise AssertionError("rollback wrote an array")


def _fill(pool, seq, n):
    """Writes n synthetic tokens through the layer caches (what a model would do), fast."""
    for l, c in enumerate(seq.layer_caches()):
        kv = mx.random.normal((1, pool.kv_heads[l], n, pool.head_dims[l]))
        c.update_and_fetch(kv, kv)
    mx.eval([c.state for c in seq.layer_caches()])


@pytest.mark.parametrize("length", [40, 408, 4008])
def test_rollback_does_no_array_work(tiny, length, monkeypatch):
    """Rollback only changes integers and the block table, whatever the length: the pool arrays,
    the working views and mlx.core itself are replaced by objects that raise on any use. The
    blocks returned depend only on how far back the rollback goes."""
    pool = PagedKVPool.for_model(tiny, block_size=16, num_blocks=8)
    seq = pool.sequence()
    _fill(pool, seq, length)
    monkeypatch.setattr(kv_pool, "mx", _Untouchable())
    monkeypatch.setattr(kv_sequence, "mx", _Untouchable())
    monkeypatch.setattr(pool, "k", [_Untouchable()] * pool.num_layers)
    monkeypatch.setattr(pool, "v", [_Untouchable()] * pool.num_layers)
    monkeypatch.setattr(pool.views, "k", [_Untouchable()] * pool.num_layers)
    monkeypatch.setattr(pool.views, "v", [_Untouchable()] * pool.num_layers)
    freed = []
    for k in (1, 7, 8, 16, 3):  # 40 -> 39 -> 32 -> 24 -> 8 -> 5, and the same mod 16 for the others
        used = pool.num_used_blocks
        assert seq.rollback(k) == k
        freed.append(used - pool.num_used_blocks)
    assert freed == [0, 1, 0, 1, 0]  # whatever the length
    assert seq.length == length - 35
    assert seq.rollback(0) == 0
    monkeypatch.undo()
    seq.free()
    pool.check()


def test_rollback_clamps_and_validates(tiny):
    pool = PagedKVPool.for_model(tiny, block_size=4)
    seq = pool.sequence()
    run(tiny, seq, tokens(6))
    assert seq.rollback(100) == 6 and seq.length == 0 and seq.block_table == []
    with pytest.raises(ValueError):
        seq.rollback(-1)
    # and the sequence is reusable from empty
    out = run(tiny, seq, tokens(6))
    assert close(out, full_logits(tiny, tokens(6)), ATOL_FULL)
    seq.free()


# -- forks and copy-on-write ---------------------------------------------------------------------------

@pytest.mark.parametrize("prompt_len,cow", [(10, 1), (8, 0)])
def test_fork_shares_blocks_and_copies_on_write(tiny, prompt_len, cow):
    """10 tokens in blocks of 4: the fork shares a half-full last block, so the first writer copies
    it (once); at 8 tokens the blocks are full and nothing is copied."""
    prompt = tokens(prompt_len, seed=7)
    pool = PagedKVPool.for_model(tiny, block_size=4, num_blocks=16)
    parent = pool.sequence()
    run(tiny, parent, prompt)
    child = pool.sequence(prefix=parent)
    assert child.block_table == parent.block_table and child.length == prompt_len
    assert pool.stats()["shared_blocks"] == len(parent.block_table)
    used = pool.num_used_blocks

    xa, xb = tokens(3, seed=8), tokens(5, seed=9)
    out_a = [run(tiny, parent, [t]) for t in xa]
    out_b = [run(tiny, child, xb[:2]), run(tiny, child, xb[2:])]
    assert close(mx.concatenate(out_a), full_logits(tiny, prompt + xa)[prompt_len:], ATOL_FULL)
    assert close(mx.concatenate(out_b), full_logits(tiny, prompt + xb)[prompt_len:], ATOL_FULL)
    assert pool.stats()["cow_copies"] == cow
    full = prompt_len // 4
    assert parent.block_table[:full] == child.block_table[:full]  # full blocks still shared
    assert parent.block_table[full:] != child.block_table[full:]
    assert pool.num_used_blocks == used + 3  # parent: cow copy or new block, +1; child: +2 / +1 and cow
    # a fork of a fork, then rollbacks on all three, then free: no leak
    grandchild = child.fork()
    grandchild.rollback(6)
    child.rollback(1)
    parent.free()
    assert close(run(tiny, grandchild, xa), full_logits(tiny, (prompt + xb)[:-6] + xa)[-3:], ATOL_FULL)
    child.free()
    grandchild.free()
    grandchild.free()  # idempotent
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks
    assert pool.stats()["live_sequences"] == 0


def test_free_is_idempotent_and_freed_sequence_refuses_use(tiny):
    pool = PagedKVPool.for_model(tiny, block_size=4)
    with pool.sequence() as seq:
        run(tiny, seq, tokens(5))
        assert pool.num_used_blocks == 2
    assert seq.closed and pool.num_used_blocks == 0
    seq.free()
    with pytest.raises(RuntimeError):
        seq.layer_caches()
    with pytest.raises(RuntimeError):
        seq.fork()


# -- prefix cache ---------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["llama", "gemma3"])
def test_prefix_reuse_matches_full_recompute(which, tiny, gemma):
    model = {"llama": tiny, "gemma3": gemma}[which]
    system = tokens(23, seed=10)
    q1, q2 = tokens(7, seed=11), tokens(9, seed=12)
    pool = PagedKVPool.for_model(model, block_size=4, num_blocks=8)

    first = pool.sequence()
    run(model, first, system + q1)
    assert pool.register_prefix(system + q1, first) == 28  # 30 tokens: 7 full blocks
    first.free()
    assert pool.num_used_blocks == 7  # held by the prefix cache only

    seq, n = pool.lookup_prefix(system + q2)
    common = next(i for i, (a, b) in enumerate(zip(system + q1, system + q2)) if a != b)
    assert n == common // 4 * 4 and n >= 20  # at least the 5 full blocks of the system prompt
    out = run(model, seq, (system + q2)[n:])
    assert close(out, full_logits(model, system + q2)[n:], ATOL_FULL)
    assert pool.stats()["view_rebuilds"] == 1
    seq.free()

    # a fully cached prompt: one token is left to run, so the caller gets logits
    whole = (system + q1)[:28]
    seq, n2 = pool.lookup_prefix(whole)
    assert n2 == 27
    out = run(model, seq, whole[n2:])
    assert close(out, full_logits(model, whole)[n2:], ATOL_FULL)
    assert pool.stats()["cow_copies"] == 1  # the shared last block was copied before the write
    seq.free()

    miss, n0 = pool.lookup_prefix(tokens(30, seed=13))
    assert n0 == 0 and miss.length == 0
    miss.free()
    stats = pool.stats()
    assert stats["prefix_lookups"] == 3 and stats["prefix_hits"] == 2
    assert stats["prefix_hit_tokens"] == n + n2
    assert pool.clear_prefix_cache() == 7
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks


def test_lru_eviction_under_pressure_then_cache_full(tiny):
    pool = PagedKVPool(3, 2, 16, block_size=4, num_blocks=8, max_blocks=8)
    p1, p2, p3 = tokens(8, seed=20), tokens(8, seed=21), tokens(12, seed=22)
    for p in (p1, p2, p3):
        cached_prefix(tiny, pool, p)
    assert pool.num_used_blocks == 7
    hit, n = pool.lookup_prefix(p1 + [1])  # p1 becomes the most recently used
    assert n == 8
    hit.free()
    # a sequence needing 4 blocks: the pool is at max_blocks, so 3 LRU blocks go: p2 (2 blocks),
    # then the leaf of p3's 3-block chain (leaves go before their ancestors)
    big = pool.sequence()
    run(tiny, big, tokens(16, seed=23))
    assert pool.stats()["prefix_evictions"] == 3 and pool.stats()["grows"] == 0
    for p, expect in ((p1, 8), (p2, 0), (p3, 8)):
        s, n = pool.lookup_prefix(p + [1])
        assert n == expect
        s.free()
    # blocks held by live sequences are never evicted: past that, CacheFullError, state intact
    other = pool.sequence()
    with pytest.raises(CacheFullError):
        run(tiny, other, tokens(17, seed=24))  # 5 blocks: 4 held by big, the cache gives up 4
    pool.check()
    assert other.length == 0
    assert pool.stats()["prefix_cached_blocks"] == 0
    big.free()
    other.free()
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks == 8


def test_registered_block_is_not_overwritten_after_rollback(tiny):
    """A sequence rolls back into a block the prefix cache holds and writes different tokens:
    the write goes to a copy, the cached prefix stays valid."""
    pool = PagedKVPool.for_model(tiny, block_size=4)
    prompt = tokens(12, seed=30)
    seq = pool.sequence()
    run(tiny, seq, prompt)
    pool.register_prefix(prompt, seq)
    seq.rollback(6)  # into block 1 (positions 4..7), which the cache holds
    other = tokens(6, seed=31)
    out = run(tiny, seq, other)
    assert close(out, full_logits(tiny, prompt[:6] + other)[6:], ATOL_FULL)
    again, n = pool.lookup_prefix(prompt + [5])
    assert n == 12
    assert close(run(tiny, again, [5]), full_logits(tiny, prompt + [5])[-1:], ATOL_FULL)
    seq.free()
    again.free()
    pool.clear_prefix_cache()
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks


# -- many cycles: accounting and correctness ------------------------------------------------------

def test_no_leaks_and_correct_logits_after_random_cycles(tiny):
    """Random generate / rollback / fork / free / register / lookup / drop_views, with the
    invariants checked after every operation; the survivors' next logits equal a full forward of
    the tokens they hold; freeing everything returns the pool to where it started."""
    rng = random.Random(42)
    pool = PagedKVPool.for_model(tiny, block_size=4, num_blocks=4, max_blocks=64)
    start_free = pool.num_free_blocks
    live = []  # (sequence, its tokens)
    for step in range(120):
        op = rng.random()
        if not live or op < 0.15:
            if rng.random() < 0.5 and live:
                base = rng.choice(live)[1]
                toks = base[: rng.randrange(len(base) + 1)] + tokens(rng.randrange(1, 6), seed=step)
                seq, n = pool.lookup_prefix(toks)
                run(tiny, seq, toks[n:])
            else:
                toks = tokens(rng.randrange(1, 14), seed=1000 + step)
                seq = pool.sequence()
                run(tiny, seq, toks)
            live.append((seq, toks))
        else:
            i = rng.randrange(len(live))
            seq, toks = live[i]
            if op < 0.45:
                new = tokens(rng.randrange(1, 6), seed=2000 + step)
                run(tiny, seq, new)
                live[i] = (seq, toks + new)
            elif op < 0.65:
                k = rng.randrange(len(toks) + 1)
                seq.rollback(k)
                live[i] = (seq, toks[: len(toks) - k])
            elif op < 0.75:
                live.append((seq.fork(), list(toks)))
            elif op < 0.82:
                pool.register_prefix(toks, seq)
            elif op < 0.87:
                seq.drop_views()
            else:
                seq.free()
                live.pop(i)
        pool.check()
        assert all(s.length == len(t) for s, t in live)
    assert pool.stats()["cow_copies"] > 0 and pool.stats()["prefix_hits"] > 0
    for seq, toks in live:
        child = seq.fork()  # the child's working views are rebuilt from the blocks alone
        out = run(tiny, child, [3])
        assert close(out, full_logits(tiny, toks + [3])[-1:], ATOL_FULL)
        out = run(tiny, seq, [7])
        assert close(out, full_logits(tiny, toks + [7])[-1:], ATOL_FULL)
        seq.free()
        child.free()
    pool.clear_prefix_cache()
    pool.check()
    assert pool.num_free_blocks == pool.num_blocks >= start_free
    assert pool.stats()["live_sequences"] == 0 and pool.stats()["used_blocks"] == 0


# -- draft + target (speculative decoding) -------------------------------------------------------

def test_speculative_draft_and_target_rollback_equals_greedy():
    """A draft model proposes 4 tokens, the target verifies them in one forward, both roll back
    the rejected ones (separate pools): the output equals plain greedy decoding of the target."""
    from mlx.utils import tree_flatten, tree_unflatten

    def build(noise):
        # weights x3: a random model with default init repeats one token; this one does not.
        # The draft is the target with noisy weights: it agrees often, not always.
        m = make_llama(seed=5)
        mx.random.seed(7)
        m.update(tree_unflatten([
            (name, (w * 3 if w.ndim == 2 else w)
             + noise * mx.abs(w).mean() * mx.random.normal(w.shape))
            for name, w in tree_flatten(m.parameters())]))
        mx.eval(m.parameters())
        return m

    target, draft = build(0.0), build(0.05)
    prompt, n_new, k = tokens(9, seed=40), 24, 4
    tpool = PagedKVPool.for_model(target, block_size=4)
    dpool = PagedKVPool.for_model(draft, block_size=4)

    ref_seq = tpool.sequence()
    y = int(mx.argmax(run(target, ref_seq, prompt)[-1]).item())
    greedy = [y]
    while len(greedy) < n_new:
        y = int(mx.argmax(run(target, ref_seq, [y])[-1]).item())
        greedy.append(y)
    ref_seq.free()

    tseq, dseq = tpool.sequence(), dpool.sequence()
    out = [int(mx.argmax(run(target, tseq, prompt)[-1]).item())]
    run(draft, dseq, prompt)
    accepted = []
    while len(out) < n_new:
        proposal, y = [], out[-1]
        for _ in range(k):
            y = int(mx.argmax(run(draft, dseq, [y])[-1]).item())
            proposal.append(y)
        verify = mx.argmax(run(target, tseq, [out[-1]] + proposal), axis=-1).tolist()
        n_ok = 0
        while n_ok < k and proposal[n_ok] == verify[n_ok]:
            n_ok += 1
        out += proposal[:n_ok] + [verify[n_ok]]
        tseq.rollback(k - n_ok)  # the target ran last + all k proposals: keep last + n_ok of them
        if n_ok == k:  # the draft never ran its own last proposal
            run(draft, dseq, proposal[-1:])
        else:
            dseq.rollback(k - 1 - n_ok)
        assert dseq.length == tseq.length
        accepted.append(n_ok)
        assert tseq.length == len(prompt) + len(out) - 1
    assert out[:n_new] == greedy
    assert k in accepted and any(n < k for n in accepted), accepted  # both paths were taken
    for s in (tseq, dseq):
        s.free()
    for p in (tpool, dpool):
        p.check()
        assert p.num_free_blocks == p.num_blocks


# -- errors -------------------------------------------------------------------------------------------

def test_shape_errors(tiny):
    pool = PagedKVPool.for_model(tiny)
    seq = pool.sequence()
    c = seq.layer_caches()[0]
    with pytest.raises(ValueError):
        c.update_and_fetch(mx.zeros((2, 2, 1, 16)), mx.zeros((2, 2, 1, 16)))  # batch of 2
    with pytest.raises(ValueError):
        c.update_and_fetch(mx.zeros((1, 3, 1, 16)), mx.zeros((1, 3, 1, 16)))  # wrong heads
    with pytest.raises(ValueError):
        PagedKVPool(2, [2, 2, 2], 16)
    seq.free()


# -- the real default model --------------------------------------------------------------------------

@pytest.mark.slow
def test_real_model_greedy_equals_mlx_lm_cache():
    """SmolLM2-135M-Instruct (onyx.models.loader.load()): 64 greedy tokens on a ChatML prompt with the
    paged cache equal mlx-lm's own cache, token for token."""
    loaded = models.load()
    prompt = chat_ids(loaded, [{"role": "user", "content": "Write a short poem about the sea."}])
    ref = models.greedy_generate(loaded, prompt, 64, stop_at_eos=False)

    pool = PagedKVPool.for_model(loaded.model)
    seq = pool.sequence()
    out, logits = [], run(loaded.model, seq, prompt)
    while len(out) < 64:
        out.append(int(mx.argmax(logits[-1]).item()))
        logits = run(loaded.model, seq, [out[-1]])
    assert out == ref
    assert seq.length == len(prompt) + 64
    seq.free()
    assert pool.num_free_blocks == pool.num_blocks


def test_the_cache_gives_way_before_the_pool_grows_past_what_live_sequences_hold(tiny):
    """Growing the pool copies every block (a pause of every stream), so the pool grows for the
    live sequences, not for a prefix cache that already holds more blocks than they do."""
    pool = PagedKVPool(3, 2, 16, block_size=4, num_blocks=8, max_blocks=64)
    for seed in (30, 31, 32):
        cached_prefix(tiny, pool, tokens(8, seed=seed))  # 6 blocks held by the cache alone
    live = pool.sequence()
    run(tiny, live, tokens(8, seed=33))  # the last 2 free blocks
    other = pool.sequence()
    run(tiny, other, tokens(8, seed=34))  # cache 6 > live 2: the LRU entry goes
    assert pool.stats()["grows"] == 0 and pool.stats()["prefix_evictions"] == 2
    s, n = pool.lookup_prefix(tokens(8, seed=30) + [1])
    assert n == 0  # the least recently used prompt
    s.free()
    more = pool.sequence()
    run(tiny, more, tokens(16, seed=35))  # cache 4, live 4: now the pool grows
    assert pool.stats()["grows"] == 1 and pool.stats()["prefix_evictions"] == 2
    for seed in (31, 32):
        s, n = pool.lookup_prefix(tokens(8, seed=seed) + [1])
        assert n == 8
        s.free()
    for seq in (live, other, more):
        seq.free()
    pool.check()
