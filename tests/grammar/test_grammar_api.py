"""The step API's contract: shapes, types, no copies, EOS rules, and the state as a plain int."""

from __future__ import annotations

import numpy as np
import pytest

import onyx
import onyx._grammar
import onyx.models.assets
import onyx.grammar.self_test


def test_bitmask_is_a_shared_read_only_uint32_view(vocabs):
    for vocab in vocabs.values():
        g = vocab.compile_regex(r"[A-Z]{3}-[0-9]{4}")
        s = g.initial_state
        m1 = g.token_bitmask(s)
        m2 = g.token_bitmask(s)
        assert m1 is m2, "token_bitmask must hand out the same array, not a copy per call"
        assert m1.dtype == np.uint32 and m1.shape == ((vocab.size + 31) // 32,)
        assert not m1.flags.writeable
        with pytest.raises(ValueError):
            m1[0] = 0
        bits = np.unpackbits(m1.view(np.uint8), bitorder="little")[: vocab.size]
        assert np.array_equal(np.flatnonzero(bits).astype(np.int32), g.allowed_token_ids(s))


def test_allowed_ids_are_int32_and_match_advance(smollm2):
    g = smollm2.compile_regex(r"[0-9]{2}(px|em)")
    s = g.initial_state
    allowed = g.allowed_token_ids(s)
    assert allowed.dtype == np.int32 and len(allowed) > 0
    for t in allowed.tolist():
        assert smollm2.token_bytes(t).isdigit()
        g.advance(s, t)
    toks, nexts = g.transitions(s)
    assert sorted(toks.tolist()) == allowed.tolist()
    for t, n in zip(toks.tolist(), nexts.tolist()):
        assert g.advance(s, t) == n


def test_eos_only_in_accepting_states_and_states_are_ints(smollm2):
    g = smollm2.compile_regex(r"ab?")
    eos = smollm2.eos_token_ids
    assert eos, "SmolLM2 declares EOS ids"
    s0 = g.initial_state
    assert isinstance(s0, int)
    assert not g.is_accepting(s0)
    assert not set(eos) & set(g.allowed_token_ids(s0).tolist())
    a = next(t for t in g.allowed_token_ids(s0).tolist() if smollm2.token_bytes(t) == b"a")
    s1 = g.advance(s0, a)
    assert g.is_accepting(s1)
    assert set(eos) <= set(g.allowed_token_ids(s1).tolist())
    for e in eos:
        assert g.advance(s1, e) == s1
        with pytest.raises(onyx.TokenNotAllowedError):
            g.advance(s0, e)
    # Draft states are plain ints: advancing a copy leaves the main state untouched.
    draft = s1
    draft = g.advance(draft, next(t for t in g.allowed_token_ids(s1).tolist() if smollm2.token_bytes(t) == b"b"))
    assert g.is_accepting(s1) and g.allowed_token_ids(draft).tolist() == sorted(eos)


def test_special_tokens_are_never_allowed(vocabs):
    for vocab in vocabs.values():
        g = vocab.compile_regex(r"(?s:.){1,3}")
        allowed = set(g.allowed_token_ids(g.initial_state).tolist())
        specials = [t for t in range(vocab.size) if vocab.is_special(t)]
        assert specials, "each real vocabulary has control tokens"
        assert not allowed & set(specials)
        for t in specials[:50]:
            with pytest.raises(onyx.TokenNotAllowedError):
                g.advance(g.initial_state, t)


def test_forced_bytes_and_min_tokens(smollm2):
    g = smollm2.compile_regex(r'\{"id":"[A-Z]{3}","ok":(true|false)\}')
    s = g.initial_state
    assert g.forced_bytes(s) == b'{"id":"'
    assert g.min_tokens_to_accept(s) >= 4
    for t in g.allowed_token_ids(s).tolist():
        assert b'{"id":"'.startswith(smollm2.token_bytes(t)) or smollm2.token_bytes(t).startswith(b'{"id":"')
    g2 = smollm2.compile_regex(r"[0-9]+")
    assert g2.forced_bytes(g2.initial_state) == b""
    assert g2.min_tokens_to_accept(g2.initial_state) == 1


def test_lazy_first_mask_then_eager_build_agree(vocabs):
    vocab = vocabs["qwen2"]
    pattern = r"[a-z]+@[a-z]+\.(com|org)"
    lazy = vocab.compile_regex(pattern)
    assert lazy.states_built == 0
    lazy.token_bitmask(lazy.initial_state)
    assert lazy.states_built == 1
    eager = vocab.compile_regex(pattern)
    eager.build_all()
    assert eager.states_built == eager.num_states
    for s in range(eager.num_states):
        assert np.array_equal(lazy.token_bitmask(s), eager.token_bitmask(s))
    assert eager.memory_bytes > lazy.num_states * 4


def test_vocab_size_padding_and_metadata(smollm2):
    assert len(smollm2) == smollm2.size == 49152
    assert smollm2.family == "byte_level"
    assert 2 in smollm2.eos_token_ids  # <|im_end|>
    assert smollm2.token_bytes(2) == b"<|im_end|>"
    padded = onyx.Vocabulary.from_gguf(onyx.models.assets.asset_path("smollm2"), vocab_size=49280)
    assert padded.size == 49280 and padded.is_special(49279)
    g = padded.compile_regex("[a-z]")
    assert g.token_bitmask(0).shape == (49280 // 32,)


def test_star_import_gives_every_public_name():
    namespace: dict = {}
    exec("from onyx import *", namespace)
    missing = set(onyx.__all__) - namespace.keys()
    assert not missing, f"`from onyx import *` lacks {sorted(missing)}"
    assert namespace["Vocabulary"] is onyx.Vocabulary
    assert namespace["self_test"] is onyx.grammar.self_test.self_test


def test_every_vocabulary_constructor_gives_the_public_class(smollm2, hf_tokenizers, tmp_path):
    tok = hf_tokenizers["smollm2"]
    path = tmp_path / "tokenizer.json"
    path.write_text(tok.to_str())
    built = [
        onyx.Vocabulary.from_gguf(onyx.models.assets.asset_path("smollm2")),
        onyx.Vocabulary.from_tokenizer_json_str(tok.to_str()),
        onyx.Vocabulary.from_tokenizer_json(path, self_test=False),
        onyx.Vocabulary.from_hf(tok, self_test=False),
        onyx.Vocabulary(smollm2),
    ]
    for vocab in built:
        assert type(vocab) is onyx.Vocabulary and isinstance(vocab, onyx._grammar.Vocabulary)
        assert vocab.size == smollm2.size and vocab.token_bytes(17) == smollm2.token_bytes(17)
        assert vocab.compile_regex("[0-9]+").validate("42")
