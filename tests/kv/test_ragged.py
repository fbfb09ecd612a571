"""The batched step's KV layout (`onyx.kv.ragged`): several sequences in one forward give each
sequence's own logits, and a write that failed mid-step is written again."""

from __future__ import annotations

import pytest

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)
import mlx.core as mx  # noqa: E402
from kv_models import ATOL_FULL, cached_prefix, close, full_logits, model, run, tiny, tokens  # noqa: F401

from onyx.kv.pool import PagedKVPool


@pytest.mark.parametrize("shared_capacity, alone_cost", [(None, None), (12, None), (None, 4)])
def test_ragged_forward_matches_each_sequence_alone(model, shared_capacity, alone_cost, monkeypatch):
    """Several sequences in one forward (`onyx.kv.ragged`): segments of a few rows attend
    together over the view slots, a longer one alone, and every row's logits are those of its
    sequence run alone: on every architecture here (sliding windows too), across block
    boundaries, with a fork sharing blocks and a sequence whose view was dropped. With shared
    arrays of 12 tokens a slot, sequences start in or move to view arrays of their own midway."""
    from onyx.kv import sequence as paged_sequence
    from onyx.kv import ragged

    if shared_capacity is not None:
        monkeypatch.setattr(paged_sequence, "SHARED_CAPACITY", shared_capacity)
    if alone_cost is not None:  # short segments much longer than the others attend alone
        monkeypatch.setattr(ragged, "ALONE_COST_KEYS", alone_cost)
    assert ragged.install(model)
    pool = PagedKVPool.for_model(model, block_size=4, num_blocks=8)
    seqs, history = [], []
    for i, n in enumerate([3, 9, 14, 7]):
        seqs.append(pool.sequence())
        history.append(tokens(n, seed=20 + i))
        run(model, seqs[-1], history[-1])
    seqs.append(seqs[1].fork())  # shares seqs[1]'s blocks; its view is rebuilt from them
    history.append(list(history[1]))
    seqs[2].drop_views()  # rebuilt on the next forward
    for step in range(3):
        rows = [[5], tokens(3, seed=30 + step), tokens(ragged.BATCHED_ROWS + 3, seed=40 + step),
                [7], tokens(2, seed=50 + step)]
        caches = ragged.layer_caches(seqs, [len(r) for r in rows])
        together = model(mx.array([t for r in rows for t in r])[None], cache=caches)[0]
        mx.eval(together)
        a = 0
        for seq, r, h in zip(seqs, rows, history):
            seq.truncate(seq.length - len(r))
            alone = run(model, seq, r)
            assert close(together[a:a + len(r)], alone, ATOL_FULL), (step, a)
            h.extend(r)  # and both are what the whole sequence gives in one forward
            assert close(alone, full_logits(model, h)[-len(r):], ATOL_FULL), (step, a)
            a += len(r)
    for seq in seqs:
        assert (seq.views is pool.views) == (shared_capacity is None or seq.length <= shared_capacity)
    assert pool.views.in_use == sum(seq.views is pool.views for seq in seqs)
    for seq in seqs:
        seq.free()
    assert pool.views.in_use == 0 and pool.views.slots == 0  # the arrays go with the last slot
    pool.check()


def test_a_segment_far_longer_than_the_others_attends_alone():
    from onyx.kv.ragged import ALONE_COST_KEYS, _batched

    ends = [200, 260, 180, 2600, 240]  # eight-ish decodes and a prompt 2,600 tokens in
    assert _batched([0, 1, 2, 3, 4], ends) == [0, 1, 2, 4]
    near = [200, 260, 180, 260 + ALONE_COST_KEYS // 4, 240]  # padding for 4 slots: about the cost
    assert _batched([0, 1, 2, 3, 4], near) == [0, 1, 2, 3, 4]
    assert _batched([3, 1], ends) == [3, 1] and _batched([], ends) == []  # one slot of padding is cheaper


def test_a_failed_write_is_written_again(tiny):
    """A forward that was to fill a block failed before its pool writes ran (a shared batched
    step that raised): `discard_failed_write` forgets them, so the block's rows are written from
    the view when it fills again, and a fork (whose view is rebuilt from the blocks) sees them."""
    pool = PagedKVPool.for_model(tiny, block_size=16)
    seq = pool.sequence()
    toks = tokens(17, seed=9)
    run(tiny, seq, toks[:15])
    seq.prepare_write(15, 16)  # what a forward writing row 15 plans first; then it fails
    seq.discard_failed_write(15)
    run(tiny, seq, toks[15:16])
    child = seq.fork()
    assert close(run(tiny, child, toks[16:]), full_logits(tiny, toks)[-1:], ATOL_FULL)
    child.free()
    seq.free()
    pool.check()


def test_a_sequence_expected_to_outgrow_the_shared_views_takes_its_own_once(tiny, monkeypatch):
    """A long prompt going in a chunk at a time (`expect`) gets view arrays of its own sized for
    the whole prompt, allocated beforehand on another thread. Beside another sequence its first
    chunks take a shared slot (they attend with the others) while they fit the slots as they
    are; it moves to its own arrays when it would outgrow them: it never grows the shared
    arrays' length (every slot's copy) nor copies its own rows once per chunk. Arrays of one
    sequence then grow by a quarter at least."""
    from onyx.kv import sequence as paged_sequence
    from onyx.kv import views as kv_views

    monkeypatch.setattr(paged_sequence, "SHARED_CAPACITY", 300)
    grows = []
    original = kv_views.ViewSlots._grow

    def counted(self, slots, capacity, **kwargs):
        grows.append((self.headroom, slots, capacity))
        return original(self, slots, capacity, **kwargs)

    monkeypatch.setattr(kv_views.ViewSlots, "_grow", counted)
    pool = PagedKVPool.for_model(tiny, block_size=16)
    short = pool.sequence()
    run(tiny, short, tokens(5, seed=60))
    assert short.views is pool.views and pool.views.capacity == kv_views.STEP
    prompt = tokens(700, seed=61)
    for expected in (len(prompt), 0):
        grows.clear()
        seq = pool.sequence()
        seq.expect(expected)  # past the shared arrays: allocated on another thread
        if expected:
            assert seq._own_views is not None
            seq._own_views[1].wait(60)
            assert seq.views_ready and seq.views is None
        spare = pool.views._spare
        assert (spare is None or spare.done.wait(60)) and pool.views.slot_ready()  # a slot beside `short`'s
        outs = [run(tiny, seq, prompt[:50])]
        assert seq.views is pool.views  # its first rows fit the shared slots as they are
        outs = mx.concatenate(outs + [run(tiny, seq, prompt[a:a + 50]) for a in range(50, len(prompt), 50)])
        assert seq.views is not pool.views
        shared_grows = [g for g in grows if g[0] == 0]
        own_grows = [g for g in grows if g[0] > 0]
        if expected:
            assert {g[2] for g in shared_grows} <= {kv_views.STEP}  # more slots at most, never longer ones
            assert [g[2] for g in own_grows] == [768]  # one allocation
            assert pool.views.capacity == kv_views.STEP
            first = outs
        else:  # without the hint: the shared arrays grow on its way to 300, then its own arrays
            assert shared_grows and len(own_grows) >= 2
            assert close(outs, first, ATOL_FULL)
        run(tiny, seq, tokens(200, seed=62))  # 900 tokens: its own arrays grow by a quarter
        assert seq.views.capacity >= 1024
        seq.free()
    short.free()
    pool.check()
    unused = pool.sequence()
    unused.expect(900)
    unused.free()  # before its arrays were used: they are dropped with it
    assert unused._own_views is None and pool.views.in_use == 0


def test_a_long_prompt_takes_its_own_arrays_at_once_when_no_shared_slot_is_ready(tiny, monkeypatch):
    """With every shared slot taken and no larger arrays prepared, a long prompt's first chunk
    goes to the arrays prepared for it: taking a shared slot would double the shared arrays
    inside the others' step."""
    from onyx.kv import sequence as paged_sequence
    from onyx.kv import views as kv_views

    monkeypatch.setattr(paged_sequence, "SHARED_CAPACITY", 300)
    monkeypatch.setattr(kv_views.ViewSlots, "_prepare_spare", lambda self, slots: None)
    pool = PagedKVPool.for_model(tiny, block_size=16)
    short = pool.sequence()
    run(tiny, short, tokens(5, seed=90))
    assert pool.views.in_use == pool.views.slots == 1 and not pool.views.slot_ready()
    seq = pool.sequence()
    seq.expect(400)
    assert seq._own_views is not None and seq._own_views[1].wait(60)
    prompt = tokens(400, seed=91)
    out = run(tiny, seq, prompt[:50])
    assert seq.views is not pool.views and pool.views.slots == 1
    assert close(out, full_logits(tiny, prompt[:50]), ATOL_FULL)
    seq.free()
    short.free()
    pool.check()


def test_a_long_cached_prefix_beside_short_sequences_takes_arrays_of_its_own(tiny):
    """A sequence that starts from a long cached prefix (a conversation sent again) would make
    every slot of the shared arrays as long as its prefix in one step, beside sequences that
    are decoding. Past one step of growth it takes arrays of its own instead, prepared on
    another thread by `expect`, and reads the same logits; with no other sequence holding a
    slot it stays shared."""
    from onyx.kv import views as kv_views

    pool = PagedKVPool.for_model(tiny, block_size=16)
    prefix = tokens(600, seed=80)
    cached_prefix(tiny, pool, prefix)
    assert pool.views.slots == 0
    short = pool.sequence()
    run(tiny, short, tokens(5, seed=81))
    assert pool.views.capacity == kv_views.STEP  # the prefix needs two steps more
    tail = tokens(3, seed=82)
    for beside in (True, False):
        if not beside:
            short.free()
        resent, cached = pool.lookup_prefix(prefix + tail, leave_last=False)
        assert cached == 592  # whole blocks
        resent.expect(len(prefix + tail))
        if beside:
            assert resent._own_views is not None and resent._own_views[1].wait(60)
        out = run(tiny, resent, (prefix + tail)[cached:])
        assert close(out, full_logits(tiny, prefix + tail)[cached:], ATOL_FULL)
        if beside:
            assert resent.views is not pool.views and pool.views.capacity == kv_views.STEP
        else:
            assert resent.views is pool.views and pool.views.capacity >= 600
        resent.free()
    pool.check()


def test_the_shared_views_prepare_more_slots_before_a_sequence_needs_one(tiny, monkeypatch):
    """Once every slot of the shared arrays is taken, arrays with twice the slots are zero-filled
    on another thread; the next sequence takes them without a synchronous growth, and the
    sequences already there read their rows as before (copied in)."""
    from onyx.kv import views as kv_views

    grows = []
    original = kv_views.ViewSlots._grow

    def counted(self, slots, capacity, **kwargs):
        grows.append((slots, capacity))
        return original(self, slots, capacity, **kwargs)

    monkeypatch.setattr(kv_views.ViewSlots, "_grow", counted)
    pool = PagedKVPool.for_model(tiny, block_size=16)
    views = pool.views
    views.make_room(2)
    first, second = pool.sequence(), pool.sequence()
    a, b = tokens(12, seed=70), tokens(9, seed=71)
    run(tiny, first, a[:7])
    run(tiny, second, b[:5])
    assert views.slots == 2 and views.in_use == 2
    assert views._spare is not None and views._spare.slots == 4
    assert views._spare.done.wait(60)
    grows.clear()
    third = pool.sequence()
    c = tokens(6, seed=72)
    out_c = run(tiny, third, c)
    assert grows == [] and views.slots == 4 and views.in_use == 3
    assert close(run(tiny, first, a[7:]), full_logits(tiny, a)[7:], ATOL_FULL)
    assert close(run(tiny, second, b[5:]), full_logits(tiny, b)[5:], ATOL_FULL)
    assert close(out_c, full_logits(tiny, c), ATOL_FULL)
    for s in (first, second, third):
        s.free()
    assert views.slots == 0 and views._spare is None  # dropped with the arrays
    pool.check()


@pytest.mark.parametrize("n, t", [(1, 1), (1, 700), (6, 300), (64, 900)])
def test_the_cpu_attention_computes_what_the_fused_kernel_does(n, t):
    """`cpu_attention` (the CPU's attention for a lone sequence or a segment attending alone)
    against `mx.fast.scaled_dot_product_attention` under every mask mlx-lm passes: none,
    "causal", a boolean window mask (n, T) and (1, 1, n, T); a mask it does not take (additive)
    or another dtype is left to the kernel (None)."""
    from onyx.kv.ragged import cpu_attention
    from onyx.kv.sequence import _causal_mask

    mx.random.seed(n * 1000 + t)
    q, k, v = (mx.random.normal(shape) for shape in ((1, 9, n, 64), (1, 3, t, 64), (1, 3, t, 64)))
    window = _causal_mask(n, t - n, 50, 0)
    masks = ([None] if n == 1 else []) + ["causal", _causal_mask(n, t - n, None, 0), window, window[None, None]]
    for mask in masks:
        got = cpu_attention(q, k, v, 0.125, mask)
        want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask=mask)
        assert got is not None and got.shape == want.shape
        assert mx.allclose(got, want, atol=1e-5).item(), mask if isinstance(mask, str) else type(mask)
    additive = mx.where(window, 0.0, -mx.inf)
    assert cpu_attention(q, k, v, 0.125, additive) is None
    assert cpu_attention(q.astype(mx.float16), k.astype(mx.float16), v.astype(mx.float16), 0.125, None) is None
