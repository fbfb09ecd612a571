"""`onyx.models.gguf_tokenizer`: tokenizer.json rebuilt from the three cached GGUF headers.

The rebuilt files are loaded with the `tokenizers` library and checked against the GGUF itself:
text round-trips, every token id writes the same bytes as `Vocabulary.from_gguf` says, control
tokens match whole, and Gemma's SentencePiece encoding equals a direct implementation of
SentencePiece's BPE (merge the adjacent pair making the highest-scoring piece, repeat).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from tokenizers import Tokenizer

import onyx
from onyx.models import assets
from onyx.models.gguf_tokenizer import (
    LLAMA3_REGEX,
    tokenizer_config_from_gguf,
    tokenizer_json_from_gguf,
    write_tokenizer_files,
)

ASSETS = {"smollm2": "smollm2", "qwen2": "qwen2-tokenizer", "gemma3": "gemma3-tokenizer"}

PROBES = [
    "The quick brown fox jumps over the lazy dog.",
    "   leading spaces",
    "line one\nline two\r\n\ttabbed\t\tend\n\n",
    "12345",
    "café naïve",
    "日本語のテキスト",
    "👩\u200d💻",
    "e\u0301",
    '{"a": [1, 2]}',
    "trailing spaces   ",
]


@dataclass
class Converted:
    path: Path
    metadata: dict
    json: dict
    tokenizer: Tokenizer


def gguf_path(asset: str) -> Path:
    path = assets.asset_path(asset)
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python -m onyx.models.assets fetch {asset}` (make test does)")
    return path


@pytest.fixture(scope="module")
def converted() -> dict[str, Converted]:
    """Each cached GGUF converted once for the module (Gemma's 262k vocab takes a few seconds)."""
    out = {}
    for name, asset in ASSETS.items():
        path = gguf_path(asset)
        metadata = onyx.read_gguf_metadata(str(path))
        tj = tokenizer_json_from_gguf(metadata)
        out[name] = Converted(path, metadata, tj, Tokenizer.from_str(json.dumps(tj)))
    return out


def ids(conv: Converted, text: str) -> list[int]:
    return conv.tokenizer.encode(text, add_special_tokens=False).ids


def token_id(conv: Converted, token: str) -> int:
    return conv.metadata["tokenizer.ggml.tokens"].index(token)


# --- every tokenizer -------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ASSETS))
@pytest.mark.parametrize("text", PROBES)
def test_decode_of_encode_is_the_text(converted, name, text):
    conv = converted[name]
    assert conv.tokenizer.decode(ids(conv, text), skip_special_tokens=False) == text


@pytest.mark.parametrize("name", list(ASSETS))
def test_every_token_writes_the_bytes_the_gguf_says(converted, name):
    conv = converted[name]
    from_gguf = onyx.Vocabulary.from_gguf(conv.path)
    from_json = onyx.Vocabulary.from_tokenizer_json_str(json.dumps(conv.json))
    assert from_json.size == from_gguf.size == len(conv.metadata["tokenizer.ggml.tokens"])
    assert from_json.family == from_gguf.family
    byte_diffs = [i for i in range(from_gguf.size) if from_json.token_bytes(i) != from_gguf.token_bytes(i)]
    special_diffs = [i for i in range(from_gguf.size) if from_json.is_special(i) != from_gguf.is_special(i)]
    assert byte_diffs == []
    assert special_diffs == []


@pytest.mark.parametrize("name", list(ASSETS))
def test_ids_are_the_gguf_ids(converted, name):
    conv = converted[name]
    tokens = conv.metadata["tokenizer.ggml.tokens"]
    assert conv.tokenizer.get_vocab_size(with_added_tokens=True) == len(tokens)
    for token_id in [0, 1, 2, len(tokens) // 2, len(tokens) - 1]:
        assert conv.tokenizer.id_to_token(token_id) == tokens[token_id]
        assert conv.tokenizer.token_to_id(tokens[token_id]) == token_id


@pytest.mark.parametrize(
    ("name", "control"),
    [
        ("smollm2", "<|im_start|>"),
        ("smollm2", "<|im_end|>"),
        ("qwen2", "<｜User｜>"),
        ("qwen2", "<｜end▁of▁sentence｜>"),
        ("qwen2", "<think>"),  # user-defined: whole, but not special
        ("gemma3", "<start_of_turn>"),
        ("gemma3", "<end_of_turn>"),
    ],
)
def test_added_tokens_in_text_are_one_token(converted, name, control):
    conv = converted[name]
    encoded = ids(conv, f"x{control}user\n")
    assert token_id(conv, control) in encoded
    assert conv.tokenizer.decode(encoded, skip_special_tokens=False) == f"x{control}user\n"


@pytest.mark.parametrize("name", list(ASSETS))
def test_special_tokens_are_skipped_when_decoding(converted, name):
    conv = converted[name]
    eos = conv.metadata["tokenizer.ggml.eos_token_id"]
    assert conv.tokenizer.decode(ids(conv, "hi") + [eos], skip_special_tokens=True) == "hi"


# --- byte-level BPE: SmolLM2 and Qwen2 -------------------------------------------------------


def test_smollm2_sentence_is_whole_words(converted):
    conv = converted["smollm2"]
    text = "What is the capital of France?"
    encoded = conv.tokenizer.encode(text, add_special_tokens=False)
    # One token per word, its leading space included (GPT-2's split, then full BPE merges).
    assert encoded.tokens == ["What", "Ġis", "Ġthe", "Ġcapital", "Ġof", "ĠFrance", "?"]
    assert conv.tokenizer.decode(encoded.ids) == text
    paris = ids(conv, " Paris")
    assert paris == [token_id(conv, "ĠParis")]


def test_smollm2_splits_digits_one_by_one(converted):
    conv = converted["smollm2"]
    assert [conv.tokenizer.id_to_token(i) for i in ids(conv, "12345")] == ["1", "2", "3", "4", "5"]
    # Digits(individual_digits) runs before ByteLevel: " 42" is " ", "4", "2".
    assert [conv.tokenizer.id_to_token(i) for i in ids(conv, "x 42")] == ["x", "Ġ", "4", "2"]


def test_smollm2_chat_markup(converted):
    conv = converted["smollm2"]
    encoded = ids(conv, "<|im_start|>user\nHi<|im_end|>")
    assert encoded[0] == 1
    assert encoded[-1] == 2
    assert [conv.tokenizer.id_to_token(i) for i in encoded[1:-1]] == ["user", "Ċ", "Hi"]


def test_qwen2_uses_its_own_split(converted):
    conv = converted["qwen2"]
    pieces = [p for p, _ in conv.tokenizer.pre_tokenizer.pre_tokenize_str("I'M 2024 ok!\n\n  x")]
    # Case-insensitive contractions, single digits, punctuation runs keep trailing newlines.
    assert pieces == ["I", "'M", "Ġ", "2", "0", "2", "4", "Ġok", "!ĊĊ", "Ġ", "Ġx"]
    assert len(ids(conv, "12345")) == 5


def test_llama3_pre_tokenizer_groups_digits_by_three(converted):
    metadata = dict(converted["smollm2"].metadata, **{"tokenizer.ggml.pre": "llama-bpe"})
    tj = tokenizer_json_from_gguf(metadata)
    assert tj["pre_tokenizer"]["pretokenizers"][0]["pattern"] == {"Regex": LLAMA3_REGEX}
    assert tj["model"]["ignore_merges"] is True
    tok = Tokenizer.from_str(json.dumps(tj))
    assert [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("12345")] == ["123", "45"]


def test_gpt2_pre_tokenizer_and_unknown_names(converted):
    metadata = dict(converted["smollm2"].metadata, **{"tokenizer.ggml.pre": "gpt-2"})
    tok = Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(metadata)))
    assert [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("12345 ab")] == ["12345", "Ġab"]
    with pytest.warns(UserWarning, match="unknown GGUF pre-tokenizer"):
        tokenizer_json_from_gguf(dict(metadata, **{"tokenizer.ggml.pre": "no-such-pre"}))


def test_unsupported_tokenizer_model_is_an_error(converted):
    metadata = dict(converted["smollm2"].metadata, **{"tokenizer.ggml.model": "bert"})
    with pytest.raises(ValueError, match="not supported"):
        tokenizer_json_from_gguf(metadata)


# --- SentencePiece BPE: Gemma 3 --------------------------------------------------------------


def test_gemma_hello_world(converted):
    conv = converted["gemma3"]
    encoded = conv.tokenizer.encode("Hello world", add_special_tokens=False)
    assert encoded.tokens == ["Hello", "▁world"]
    assert conv.tokenizer.decode(encoded.ids) == "Hello world"


def test_gemma_rare_characters_fall_back_to_bytes(converted):
    conv = converted["gemma3"]
    text = "\U0001F9A9"  # not a piece in the vocab: four UTF-8 byte tokens
    encoded = conv.tokenizer.encode(text, add_special_tokens=False)
    assert encoded.tokens == ["<0xF0>", "<0x9F>", "<0xA6>", "<0xA9>"]
    assert conv.tokenizer.decode(encoded.ids) == text


def test_gemma_whitespace_runs_are_user_defined_tokens(converted):
    conv = converted["gemma3"]
    encoded = ids(conv, "a    b\n\nc")
    assert encoded == [token_id(conv, t) for t in ["a", "    ", "b", "\n\n", "c"]]


class SentencePieceReference:
    """SentencePiece's BPE encoding, written directly from its definition.

    The text is first cut at added tokens (control and user-defined, longest first, as
    llama.cpp does); in each remaining fragment spaces become "▁", and adjacent symbols are
    merged while some pair forms a normal piece, the highest-scoring such pair first (leftmost on
    ties). Symbols that are not pieces are written as byte tokens.
    """

    def __init__(self, metadata: dict):
        tokens = metadata["tokenizer.ggml.tokens"]
        types = metadata["tokenizer.ggml.token_type"]
        self.scores = metadata["tokenizer.ggml.scores"]
        self.pieces = {t: i for i, t in enumerate(tokens) if types[i] == 1}
        self.byte_ids = {int(t[3:5], 16): i for i, t in enumerate(tokens) if types[i] == 6}
        added = [(t, i) for i, t in enumerate(tokens) if types[i] in (2, 3, 4, 5)]
        self.added = sorted(added, key=lambda pair: -len(pair[0]))

    def encode(self, text: str) -> list[int]:
        fragments: list[str | int] = [text]
        for content, token_id in self.added:
            cut: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int):
                    cut.append(fragment)
                    continue
                for k, part in enumerate(fragment.split(content)):
                    if k:
                        cut.append(token_id)
                    if part:
                        cut.append(part)
            fragments = cut
        out: list[int] = []
        for fragment in fragments:
            out.extend([fragment] if isinstance(fragment, int) else self._bpe(fragment))
        return out

    def _bpe(self, text: str) -> list[int]:
        symbols = list(text.replace(" ", "\u2581"))
        while True:
            best = None
            for k in range(len(symbols) - 1):
                piece = self.pieces.get(symbols[k] + symbols[k + 1])
                if piece is not None and (best is None or self.scores[piece] > best[0]):
                    best = (self.scores[piece], k)
            if best is None:
                break
            k = best[1]
            symbols[k : k + 2] = [symbols[k] + symbols[k + 1]]
        out = []
        for symbol in symbols:
            if symbol in self.pieces:
                out.append(self.pieces[symbol])
            else:
                out.extend(self.byte_ids[b] for b in symbol.encode())
        return out


def test_gemma_matches_sentencepiece_bpe(converted):
    conv = converted["gemma3"]
    reference = SentencePieceReference(conv.metadata)
    rng = random.Random(20240611)
    words = [
        "the", " quick", " brown", " fox", "ing", " jumped", "\n", " over", "lazy", " dog", "'s", " 123",
        '{"key":', " [1, 2]", "<table>", "  ", "    ", "café", "naïve", "日本語", "のテキスト", "Привет",
        " мир", "def ", "return x", "**", "👩\u200d💻", "e\u0301", "<start_of_turn>", "\t\t", "Straße",
    ]
    alphabet = [chr(c) for c in [*range(32, 127), *range(0xA0, 0x250), *range(0x3040, 0x30FF), *range(0x400, 0x450)]]
    texts = list(PROBES)
    for n in range(400):
        if n % 2:
            texts.append("".join(rng.choice(alphabet + [" ", " ", "\n"]) for _ in range(rng.randint(1, 12))))
        else:
            texts.append("".join(rng.choice(words) for _ in range(rng.randint(1, 8))))
    mismatches = [t for t in texts if ids(conv, t) != reference.encode(t)]
    assert mismatches == []


def test_sentencepiece_with_space_prefix():
    """A Llama-2-style header (add_space_prefix): a leading "▁" is prepended, and stripped on decode."""
    pieces = ["\u2581", "h", "i", "\u2581h", "\u2581hi", "hi", "!"]
    metadata = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces],
        "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * len(pieces),
        "tokenizer.ggml.scores": [0.0] * 259 + [-float(i) for i in range(len(pieces))],
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.add_space_prefix": True,
    }
    tj = tokenizer_json_from_gguf(metadata)
    # Merges ranked by the merged piece's score, longer left part first among its splits.
    assert tj["model"]["merges"] == [["\u2581", "h"], ["\u2581h", "i"], ["\u2581", "hi"], ["h", "i"]]
    assert tj["model"]["unk_token"] == "<unk>"
    tok = Tokenizer.from_str(json.dumps(tj))
    encoded = tok.encode("hi hi?")
    assert encoded.tokens == ["\u2581hi", "\u2581hi", "<0x3F>"]
    assert tok.decode(encoded.ids) == "hi hi?"


def test_duplicate_tokens_are_an_error(converted):
    tokens = list(converted["smollm2"].metadata["tokenizer.ggml.tokens"])
    tokens[5] = tokens[6]
    with pytest.raises(ValueError, match="duplicate"):
        tokenizer_json_from_gguf(dict(converted["smollm2"].metadata, **{"tokenizer.ggml.tokens": tokens}))


# --- written files ----------------------------------------------------------------------------


def test_write_tokenizer_files(converted, tmp_path):
    conv = converted["smollm2"]
    path = write_tokenizer_files(conv.path, tmp_path / "smollm2")
    assert path == tmp_path / "smollm2" / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    assert tok.encode("Hello world", add_special_tokens=False).ids == ids(conv, "Hello world")
    config = json.loads((path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["eos_token"] == "<|im_end|>"
    assert config["bos_token"] == "<|im_start|>"
    assert config["add_bos_token"] is False
    assert config["chat_template"] == conv.metadata["tokenizer.chat_template"]
    # The directory loads as a Vocabulary, EOS taken from tokenizer_config.json.
    vocab = onyx.Vocabulary.from_tokenizer_json(path)
    assert 2 in vocab.eos_token_ids


def test_gemma_config_without_chat_template(converted):
    config = tokenizer_config_from_gguf(converted["gemma3"].metadata)
    assert config["bos_token"] == "<bos>"
    assert config["eos_token"] == "<eos>"
    assert config["unk_token"] == "<unk>"
    assert config["add_bos_token"] is True
    assert "chat_template" not in config
