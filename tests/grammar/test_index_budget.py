"""A grammar's token index and its mask tables stay within their byte budgets: rows and masks
not used lately are dropped and made again, with the same content, and a mask handed out stays
valid after its row is dropped."""

from __future__ import annotations

import numpy as np
import pytest

import onyx
from onyx.grammar.constraint import GrammarCache, MaskTable, unpack_bitmask
from onyx.options import MAX_INDEX_BYTES, ConstraintSpec

PATTERN = "[a-c]{0,40}x"


def row_bytes(vocab: onyx.Vocabulary) -> int:
    """About one row of PATTERN's index: a mask plus a few thousand next states."""
    return (vocab.size + 31) // 32 * 4 + 4 * 4096


def test_index_drops_rows_past_its_budget_and_makes_them_again(smollm2):
    free = smollm2.compile_regex(PATTERN)
    budget = 3 * row_bytes(smollm2)
    g = smollm2.compile_regex(PATTERN, max_index_bytes=budget)
    base = g.memory_bytes
    states = list(range(g.num_states))
    held = {}
    for _ in range(2):
        for s in states:
            mask = g.token_bitmask(s)
            assert np.array_equal(mask, free.token_bitmask(s)), s
            assert g.token_bitmask(s) is mask, "a kept row's mask is one shared array"
            assert np.array_equal(g.token_bitmask_within(s, 3), free.token_bitmask_within(s, 3))
            assert g.memory_bytes - base <= budget
            held[s] = mask
    assert g.states_built < len(states) // 2
    # Masks asked for before their rows were dropped still read the right words.
    for s, mask in held.items():
        assert np.array_equal(mask, free.token_bitmask(s))
    with pytest.raises(onyx.GrammarTooLargeError):
        g.build_all()


def test_mask_table_keeps_the_masks_used_lately(smollm2):
    g = smollm2.compile_regex(PATTERN)
    width = smollm2.size
    table = MaskTable(g, width, unpack_bitmask, max_bytes=3 * width)
    first = table.get(0)
    for s in range(1, g.num_states):
        table.get(s)
        table.get(0)  # used every time: never the one dropped
        assert table.memory_bytes() <= 3 * width
    assert table.get(0) is first
    for s in range(g.num_states):
        assert np.array_equal(table.get(s), unpack_bitmask(g.token_bitmask(s), width))


def test_cache_bounds_each_grammar_by_the_smaller_budget(smollm2):
    small = 4 * smollm2.size
    cache = GrammarCache(smollm2, max_bytes=small)
    compiled = cache.get(ConstraintSpec.parse(regex=PATTERN))
    assert compiled.max_table_bytes == small
    table = compiled.table("numpy", smollm2.size, unpack_bitmask)
    base = compiled.grammar.memory_bytes
    for s in range(compiled.grammar.num_states):
        table.get(s)
        assert table.memory_bytes() <= small
        assert compiled.grammar.memory_bytes - base <= small
    assert GrammarCache(smollm2).get(ConstraintSpec.parse(regex=PATTERN)).max_table_bytes == MAX_INDEX_BYTES
