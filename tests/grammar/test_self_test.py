"""`onyx.grammar.self_test.self_test`: the tokenizer writes the bytes the grammar core assumes.

The three real tokenizers (rebuilt from their GGUF headers) pass, through `tokenizers`,
transformers and an mlx-style wrapper, and a second run is served from the on-disk cache.
Deliberately broken pairs fail with the offending token ids: swapped token strings, a special
token the vocabulary thinks is text, an EOS the tokenizer thinks is text, wrong vocabulary bytes
that only the probe strings would meet in practice. A small Llama-2-style SentencePiece
tokenizer (dummy prefix on encode, leading space stripped on decode) checks the rules for
decoders that strip the start of a sequence.

Every test points ONYX_CACHE at a temporary directory; the session fixtures (which read the
GGUF assets from the real cache) are built before it is changed.
"""

from __future__ import annotations

import json
import warnings

import pytest
from tokenizers import Tokenizer

import onyx
import onyx.models.assets
from onyx.grammar import self_test as tokenizer_check
from onyx.grammar.spelling import utf8_padding
from onyx.grammar.self_test import (
    PROBES,
    Failure,
    SelfTestReport,
    TokenizerMismatchError,
    TokenizerMismatchWarning,
    self_test,
)

from conftest import VOCABS, gguf_path


@pytest.fixture
def cache(hf_tokenizers, vocabs, monkeypatch, tmp_path):
    """A fresh ONYX_CACHE for the test (after the session fixtures read the real one)."""
    path = tmp_path / "onyx-cache"
    monkeypatch.setenv("ONYX_CACHE", str(path))
    return path


@pytest.fixture(scope="module")
def smollm2_json(hf_tokenizers) -> dict:
    return json.loads(hf_tokenizers["smollm2"].to_str())


@pytest.fixture(scope="module")
def smollm2_dir(vocabs, tmp_path_factory):
    from onyx.models.gguf_tokenizer import write_tokenizer_files

    out = tmp_path_factory.mktemp("smollm2-hf")
    write_tokenizer_files(gguf_path(VOCABS["smollm2"]), out)
    return out


def no_warnings(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def ids_of(report: SelfTestReport, kind: str) -> set[int | None]:
    return {f.token_id for f in report.failures if f.kind == kind}


def vocab_id(tj: dict, token: str) -> int:
    return tj["model"]["vocab"][token]


# --- real tokenizers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VOCABS))
def test_real_tokenizers_pass_and_the_second_run_is_cached(name, vocabs, hf_tokenizers, cache, monkeypatch):
    vocab, tok = vocabs[name], hf_tokenizers[name]
    first = no_warnings(self_test, vocab, tok, strict=True)
    assert first.ok and first.failures == [] and not first.cached
    # Every token a grammar may allow was checked.
    assert first.checked_tokens == vocab.num_allowed_tokens
    stored = cache / "selftest" / f"{first.tokenizer_hash}.json"
    assert json.loads(stored.read_text())["ok"] is True

    def must_not_run(self):
        raise AssertionError("the cached result should have been used")

    monkeypatch.setattr(tokenizer_check._Checker, "run", must_not_run)
    second = no_warnings(self_test, vocab, tok, strict=True)
    assert second.cached and second.ok
    assert (second.tokenizer_hash, second.checked_tokens) == (first.tokenizer_hash, first.checked_tokens)


def test_transformers_and_mlx_wrapper(smollm2, smollm2_dir, cache):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(smollm2_dir))
    report = no_warnings(self_test, smollm2, hf, strict=True, cache=False)
    assert report.ok and report.checked_tokens == smollm2.num_allowed_tokens

    class Wrapper:  # the shape of mlx-lm's TokenizerWrapper
        def __init__(self, tokenizer, eos):
            self._tokenizer = tokenizer
            self.eos_token_ids = eos

    class ForwardingWrapper(Wrapper):  # mlx-lm's also forwards other attributes to the tokenizer
        def __getattr__(self, name):
            if name.startswith("_"):
                raise AttributeError(name)
            return getattr(self._tokenizer, name)

    for wrapper in (Wrapper, ForwardingWrapper):
        assert no_warnings(self_test, smollm2, wrapper(hf, {2}), strict=True, cache=False).ok
        # An EOS the runtime stops on but the grammar core would never allow.
        with pytest.warns(TokenizerMismatchWarning, match="declares EOS id 1"):
            report = self_test(smollm2, wrapper(hf, {2, 1}), cache=False)
        assert ids_of(report, "eos_mismatch") == {1}

    with pytest.raises(TypeError):
        self_test(smollm2, object())


# --- broken pairs ------------------------------------------------------------------------------


def test_swapped_token_strings_fail_with_their_ids(smollm2, smollm2_json, cache):
    tj = json.loads(json.dumps(smollm2_json))
    a, b = vocab_id(tj, "Ġquick"), vocab_id(tj, "Ġlazy")
    tj["model"]["vocab"]["Ġquick"], tj["model"]["vocab"]["Ġlazy"] = b, a
    corrupt = Tokenizer.from_str(json.dumps(tj))

    with pytest.raises(TokenizerMismatchError) as err:
        self_test(smollm2, corrupt, strict=True)
    assert isinstance(err.value, onyx.GrammarError)
    message = str(err.value)
    assert f"token {a}" in message and f"token {b}" in message
    report = err.value.report
    assert not report.ok and not report.cached
    assert ids_of(report, "token_bytes") == {a, b}
    assert ids_of(report, "token_decode") == {a, b}
    # The ASCII probe meets the swapped tokens: the grammar core's bytes are not the text.
    assert ids_of(report, "probe_bytes") <= {a, b} and ids_of(report, "probe_bytes")
    detail = next(f.detail for f in report.failures if f.kind == "token_bytes" and f.token_id == a)
    assert "b' lazy'" in detail and "b' quick'" in detail

    # The failure is cached too, and still raises / warns from the cache.
    with pytest.raises(TokenizerMismatchError) as again:
        self_test(smollm2, corrupt, strict=True)
    assert again.value.report.cached and again.value.report.failures == report.failures
    with pytest.warns(TokenizerMismatchWarning, match=f"token {a}"):
        warned = self_test(smollm2, corrupt)
    assert warned.cached and not warned.ok


def test_special_token_that_is_ordinary_in_the_vocabulary(smollm2_json, hf_tokenizers, cache):
    tj = json.loads(json.dumps(smollm2_json))
    start = next(t for t in tj["added_tokens"] if t["content"] == "<|im_start|>")
    start["special"] = False
    vocab = onyx.Vocabulary.from_tokenizer_json_str(json.dumps(tj), eos_token_ids=[2, 0])
    assert not vocab.is_special(start["id"])

    with pytest.warns(TokenizerMismatchWarning, match="<\\|im_start\\|>"):
        report = self_test(vocab, hf_tokenizers["smollm2"])
    assert [(f.kind, f.token_id) for f in report.failures] == [("special_ordinary", start["id"])]


def test_eos_that_the_tokenizer_treats_as_text(smollm2_json, hf_tokenizers, cache):
    period = vocab_id(smollm2_json, ".")
    vocab = onyx.Vocabulary.from_tokenizer_json_str(json.dumps(smollm2_json), eos_token_ids=[2, period])
    with pytest.raises(TokenizerMismatchError, match=f"EOS id {period}"):
        self_test(vocab, hf_tokenizers["smollm2"], strict=True)


def test_wrong_vocabulary_bytes_are_caught_by_the_probes(smollm2, smollm2_json, hf_tokenizers, cache):
    tok = hf_tokenizers["smollm2"]
    assert self_test(smollm2, tok).ok  # the right vocabulary passes, and is cached

    tj = json.loads(json.dumps(smollm2_json))
    quick = tj["model"]["vocab"].pop("Ġquick")
    tj["model"]["vocab"]["Ġquiçk"] = quick  # the vocabulary now says " qui\xe7k"
    wrong = onyx.Vocabulary.from_tokenizer_json_str(json.dumps(tj), eos_token_ids=[2, 0])
    assert wrong.token_bytes(quick) == b" qui\xe7k"

    with pytest.raises(TokenizerMismatchError) as err:
        self_test(wrong, tok, strict=True)
    report = err.value.report
    assert not report.cached  # the same tokenizer's pass with the right vocabulary is not reused
    assert ids_of(report, "token_bytes") == {quick}
    probe = [f for f in report.failures if f.kind == "probe_bytes"]
    assert [f.token_id for f in probe] == [quick]
    assert "probe ascii" in probe[0].detail and "b' quick'" in probe[0].detail


# --- SentencePiece with a dummy prefix and a stripping decoder (Llama 2 style) ---------------


def llama2_style_json(swap_bytes: tuple[int, int] | None = None, prepend: bool = True) -> str:
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += ["▁", *"abcdefghijklmnopqrstuvwxyzTHQ.", "▁a", "▁t", "▁th", "▁the", "in", "ing"]
    vocab = {p: i for i, p in enumerate(pieces)}
    if swap_bytes:
        x, y = (f"<0x{b:02X}>" for b in swap_bytes)
        vocab[x], vocab[y] = vocab[y], vocab[x]
    special = [{"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, p in enumerate(pieces[:3])]
    return json.dumps({
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            *([{"type": "Prepend", "prepend": "▁"}] if prepend else []),
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab,
                  "merges": [["▁", "a"], ["▁", "t"], ["▁t", "h"], ["▁th", "e"], ["i", "n"], ["in", "g"]]},
    })


def test_sentencepiece_with_a_stripping_decoder(cache):
    text = llama2_style_json()
    tok = Tokenizer.from_str(text)
    vocab = onyx.Vocabulary.from_tokenizer_json_str(text, eos_token_ids=[2])
    assert vocab.family == "sentencepiece"
    the = tok.token_to_id("▁the")
    # The decoder strips the space "▁the" writes when it starts a sequence...
    assert tok.decode([the]) == "the" and vocab.token_bytes(the) == b" the"
    # ...which is not a mismatch: after other text the token writes " the".
    report = no_warnings(self_test, vocab, tok, strict=True)
    assert report.ok and report.checked_tokens == vocab.num_allowed_tokens

    # Swapped byte-fallback tokens: one ASCII byte, one UTF-8 lead byte (checked via padding).
    bad = Tokenizer.from_str(llama2_style_json(swap_bytes=(0x41, 0xC3)))
    with pytest.raises(TokenizerMismatchError) as err:
        self_test(vocab, bad, strict=True)
    report = err.value.report
    a_id, c3_id = 3 + 0x41, 3 + 0xC3
    assert ids_of(report, "token_bytes") == {a_id, c3_id}
    assert ids_of(report, "token_decode") == {a_id, c3_id}
    # The accents probe spells é as <0xC3><0xA9>: the tokenizer now writes byte 0xC3 with id
    # 3 + 0x41, which the grammar core believes writes "A".
    assert ids_of(report, "probe_bytes") == {a_id}
    assert "probe accents" in " ".join(f.detail for f in report.failures if f.kind == "probe_bytes")


def test_decoder_that_loses_text_fails_the_probes(cache):
    # No dummy prefix on encode, but the decoder still strips a leading space: text that starts
    # with a space does not survive encode -> decode (every token on its own is fine).
    text = llama2_style_json(prepend=False)
    vocab = onyx.Vocabulary.from_tokenizer_json_str(text, eos_token_ids=[2])
    with pytest.warns(TokenizerMismatchWarning, match="probe_roundtrip"):
        report = self_test(vocab, Tokenizer.from_str(text))
    assert [f.kind for f in report.failures] == ["probe_roundtrip"]
    assert "probe leading_spaces" in report.failures[0].detail
    assert "'  leading spaces'" in report.failures[0].detail


# --- pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("partial", "complete"),
    [
        (b"\xe6\x97", b"\xe6\x97\x80"),
        (b" \xf0", b" \xf0\x90\x80\x80"),
        (b"\xe0", b"\xe0\xa0\x80"),
        (b"\x80", b"\xc2\x80"),
        (b"\x97\xa5abc", b"\xe1\x97\xa5abc"),
        (b"\xa9 caf\xc3", b"\xc2\xa9 caf\xc3\x80"),
    ],
)
def test_utf8_padding(partial, complete):
    pre, suf = utf8_padding(partial)
    assert pre + partial + suf == complete
    complete.decode("utf-8")


@pytest.mark.parametrize("never", [b"\xc0", b"\xff", b"\xf5\x80", b"\x80\x80\x80\x80", b"a\xc3("])
def test_utf8_padding_of_bytes_no_text_contains(never):
    assert utf8_padding(never) is None


def test_probes_cover_the_cases_named_in_the_design():
    text = "".join(t for _, t in PROBES)
    for needed in ["é", "日本", "👩\u200d💻", "👨\u200d👩\u200d👧", "e\u0301", "   ", "\t", "\n", "0", '{"']:
        assert needed in text
    assert any(t.startswith(" ") for _, t in PROBES)


def test_report_summary_lists_the_first_failures():
    failures = [Failure("token_bytes", i, f"detail {i}") for i in range(8)]
    text = SelfTestReport(False, "ab" * 32, 10, failures).summary()
    assert "8 token_bytes" in text and "token 0" in text and "token 4" in text
    assert "token 5" not in text and "3 more" in text


def test_vocabulary_from_hf_runs_the_self_test(monkeypatch, tmp_path):
    """Building a vocabulary from a tokenizer runs the self-test and caches its verdict."""
    import tokenizers

    from onyx.models.gguf_tokenizer import write_tokenizer_files

    path = write_tokenizer_files(onyx.models.assets.asset_path("smollm2"), tmp_path / "tok")
    monkeypatch.setenv("ONYX_CACHE", str(tmp_path / "cache"))
    tok = tokenizers.Tokenizer.from_file(str(path))
    onyx.Vocabulary.from_hf(tok, eos_token_ids=[2], strict=True)
    verdicts = list((tmp_path / "cache" / "selftest").glob("*.json"))
    assert len(verdicts) == 1 and json.loads(verdicts[0].read_text())["ok"] is True
    onyx.Vocabulary.from_tokenizer_json(path, strict=True)
    assert len(list((tmp_path / "cache" / "selftest").glob("*.json"))) >= 1
    onyx.Vocabulary.from_hf(tok, self_test=False)


def test_vocabulary_from_tokenizer_json_runs_the_self_test(smollm2_dir, smollm2_json, cache):
    path = smollm2_dir / "tokenizer.json"
    vocab = no_warnings(onyx.Vocabulary.from_tokenizer_json, path, strict=True)
    assert isinstance(vocab, onyx.Vocabulary)
    verdicts = list((cache / "selftest").glob("*.json"))
    assert len(verdicts) == 1 and json.loads(verdicts[0].read_text())["ok"] is True
    period = vocab_id(smollm2_json, ".")
    with pytest.raises(TokenizerMismatchError, match=f"EOS id {period}"):
        onyx.Vocabulary.from_tokenizer_json(path, eos_token_ids=[2, period], strict=True)


def test_vocabulary_mismatch_warns_at_the_callers_line(smollm2_json, hf_tokenizers, cache):
    """As when the self-test ran from inside the extension: the warning names the line that built
    the vocabulary, not a line of onyx."""
    tok = hf_tokenizers["smollm2"]
    period = vocab_id(smollm2_json, ".")
    with pytest.warns(TokenizerMismatchWarning, match=f"EOS id {period}") as record:
        vocab = onyx.Vocabulary.from_hf(tok, eos_token_ids=[2, period])
    assert period in vocab.eos_token_ids
    assert [w.filename for w in record if w.category is TokenizerMismatchWarning] == [__file__]
    with pytest.raises(TokenizerMismatchError, match=f"EOS id {period}"):
        onyx.Vocabulary.from_hf(tok, eos_token_ids=[2, period], strict=True)
    no_warnings(onyx.Vocabulary.from_hf, tok, eos_token_ids=[2, period], self_test=False)
