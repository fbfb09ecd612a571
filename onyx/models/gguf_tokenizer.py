"""Rebuilds a Hugging Face `tokenizer.json` from the tokenizer stored in a GGUF header.

A GGUF file carries everything llama.cpp needs to tokenize (token strings, token types, BPE
merges or SentencePiece scores, the name of the pre-tokenizer), but MLX and transformers want a
`tokenizer.json`. This module writes one that tokenizes text the way llama.cpp does with the
GGUF, which is also how the model's original Hugging Face tokenizer does it.

Two GGUF tokenizer models are handled:

* `gpt2` (byte-level BPE: SmolLM, Qwen2, Llama 3, ...): a BPE model over the GGUF vocab and
  merges, a `ByteLevel` pre-tokenizer preceded by the split regex that `tokenizer.ggml.pre`
  names, and a `ByteLevel` decoder.
* `llama` (SentencePiece BPE with byte fallback: Llama 2, Gemma, ...): a BPE model with
  `byte_fallback`, whose merges are derived from the SentencePiece scores the way Hugging Face's
  SentencePiece converter derives them; spaces become `▁` in the normalizer.

Control, unknown and unused tokens become special added tokens (matched whole in the text and
skipped by `decode(..., skip_special_tokens=True)`); user-defined tokens become non-special
added tokens, matched whole in the raw text before anything else, as llama.cpp and SentencePiece
match them.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

# llama.cpp's token types (`tokenizer.ggml.token_type`).
TYPE_NORMAL = 1
TYPE_UNKNOWN = 2
TYPE_CONTROL = 3
TYPE_USER_DEFINED = 4
TYPE_UNUSED = 5
TYPE_BYTE = 6

# Added-token types, and whether each is `special` (never text, skipped when decoding).
ADDED_TOKEN_SPECIAL = {TYPE_UNKNOWN: True, TYPE_CONTROL: True, TYPE_UNUSED: True, TYPE_USER_DEFINED: False}

SPIECE_SPACE = "\u2581"  # "▁", SentencePiece's visible space

# Split regexes of the byte-level pre-tokenizers, as the models' own tokenizer.json files write them.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# `tokenizer.ggml.pre` names grouped by the pre-tokenizer they stand for (llama.cpp's grouping).
GPT2_PRES = {"default", "gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4"}
DIGITS_GPT2_PRES = {"smollm", "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "command-r"}
QWEN2_PRES = {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "kormo", "hunyuan"}
LLAMA3_PRES = {"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}


def tokenizer_json_from_gguf(metadata: dict) -> dict:
    """Returns the `tokenizer.json` (as a dict) for the tokenizer in GGUF `metadata`.

    `metadata` is what `onyx.read_gguf_metadata` returns. Raises ValueError when the tokenizer
    model is neither `gpt2` nor `llama`, or when the token list is missing or inconsistent.
    """
    model_name = metadata.get("tokenizer.ggml.model")
    if model_name not in ("gpt2", "llama"):
        raise ValueError(f"GGUF tokenizer model {model_name!r} is not supported (gpt2 and llama are)")
    tokens = _token_strings(metadata)
    types = list(metadata.get("tokenizer.ggml.token_type") or [TYPE_NORMAL] * len(tokens))
    if len(types) != len(tokens):
        raise ValueError(f"GGUF has {len(tokens)} tokens but {len(types)} token types")

    if model_name == "gpt2":
        model = _byte_level_bpe_model(metadata, tokens)
        normalizer = None
        pre_tokenizer = byte_level_pre_tokenizer(str(metadata.get("tokenizer.ggml.pre") or "default"))
        decoder: dict | None = {
            "type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True,
        }
    else:  # llama
        model = _sentencepiece_bpe_model(metadata, tokens, types)
        add_space_prefix = bool(metadata.get("tokenizer.ggml.add_space_prefix", True))
        normalizer, decoder = _sentencepiece_normalizer_decoder(add_space_prefix)
        # Hugging Face's Gemma 3 file has a Split-on-" " here, which never matches once the
        # normalizer has turned every space into "▁"; the BPE sees the same text without it.
        pre_tokenizer = None

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(tokens, types),
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        # No BOS/EOS is added on encode; `add_bos_token` is recorded in tokenizer_config.json.
        "post_processor": None,
        "decoder": decoder,
        "model": model,
    }


def write_tokenizer_files(gguf_path: str | Path, out_dir: str | Path) -> Path:
    """Writes `tokenizer.json` and `tokenizer_config.json` for a GGUF model into `out_dir`.

    The config names the BOS/EOS/UNK/PAD tokens, carries the chat template and whether the model
    expects a BOS token (`add_bos_token`), so transformers' `PreTrainedTokenizerFast` (which
    mlx-lm uses) can load the directory. Returns the path of `tokenizer.json`.
    """
    import onyx  # the Rust extension; imported here so the converter itself needs only the stdlib

    metadata = onyx.read_gguf_metadata(str(gguf_path))
    tokenizer = tokenizer_json_from_gguf(metadata)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_path = out / "tokenizer.json"
    tokenizer_path.write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    config = tokenizer_config_from_gguf(metadata)
    config_text = json.dumps(config, ensure_ascii=False, indent=2)
    (out / "tokenizer_config.json").write_text(config_text, encoding="utf-8")
    return tokenizer_path


def tokenizer_config_from_gguf(metadata: dict) -> dict:
    """Returns the `tokenizer_config.json` (as a dict) for the tokenizer in GGUF `metadata`."""
    tokens = metadata.get("tokenizer.ggml.tokens") or []

    def token_named(key: str) -> str | None:
        token_id = metadata.get(key)
        if isinstance(token_id, int) and 0 <= token_id < len(tokens):
            return tokens[token_id]
        return None

    is_spm = metadata.get("tokenizer.ggml.model") == "llama"
    # llama.cpp's defaults when the header does not say: SentencePiece models add a BOS.
    add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", is_spm))
    add_eos = bool(metadata.get("tokenizer.ggml.add_eos_token", False))
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token_named("tokenizer.ggml.bos_token_id"),
        "eos_token": token_named("tokenizer.ggml.eos_token_id"),
        "unk_token": token_named("tokenizer.ggml.unknown_token_id"),
        "pad_token": token_named("tokenizer.ggml.padding_token_id"),
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": False,
    }
    config = {k: v for k, v in config.items() if v is not None}
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template:
        config["chat_template"] = template
    return config


def byte_level_pre_tokenizer(pre: str) -> dict:
    """The pre-tokenizer of a byte-level BPE model whose GGUF `tokenizer.ggml.pre` is `pre`.

    An unknown name falls back to GPT-2's split, with a warning (llama.cpp also falls back).
    """
    if pre in DIGITS_GPT2_PRES:
        # StarCoder/SmolLM: every digit alone, then GPT-2's split inside ByteLevel.
        return {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                _byte_level(use_regex=True),
            ],
        }
    if pre in QWEN2_PRES:
        return _split_then_byte_level(QWEN2_REGEX)
    if pre in LLAMA3_PRES:
        return _split_then_byte_level(LLAMA3_REGEX)
    if pre not in GPT2_PRES:
        warnings.warn(f"unknown GGUF pre-tokenizer {pre!r}: using GPT-2's split", stacklevel=3)
    return _byte_level(use_regex=True)  # ByteLevel's own regex is GPT2_REGEX


def _byte_level(use_regex: bool) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def _split_then_byte_level(regex: str) -> dict:
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            _byte_level(use_regex=False),
        ],
    }


def _token_strings(metadata: dict) -> list[str]:
    """The GGUF token list; empty strings get llama.cpp's `[EMPTY_<id>]` name, duplicates are an error."""
    raw = metadata.get("tokenizer.ggml.tokens")
    if not raw:
        raise ValueError("GGUF has no tokenizer.ggml.tokens")
    tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(raw)]
    seen: set[str] = set()
    for token in tokens:
        if token in seen:
            # llama.cpp refuses such a file too; a vocab dict cannot give one string two ids.
            raise ValueError(f"GGUF token list has a duplicate token {token!r}")
        seen.add(token)
    return tokens


def _added_tokens(tokens: list[str], types: list[int]) -> list[dict]:
    """Control, unknown, unused and user-defined tokens as `added_tokens` entries, by id.

    All are `normalized: false`: they match the raw text, before spaces become `▁`. That is how
    llama.cpp splits text on them, and for Gemma's user-defined whitespace runs (stored in the
    GGUF with real spaces) it is the only way they can match.
    """
    added = []
    for token_id, (content, token_type) in enumerate(zip(tokens, types)):
        special = ADDED_TOKEN_SPECIAL.get(token_type)
        if special is None:
            continue
        added.append(
            {
                "id": token_id,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": special,
            }
        )
    return added


def _bpe_model(vocab: dict[str, int], merges: list[list[str]], **options: Any) -> dict:
    model = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
    }
    model.update(options)
    model["vocab"] = vocab
    model["merges"] = merges
    return model


def _byte_level_bpe_model(metadata: dict, tokens: list[str]) -> dict:
    """BPE over the GGUF vocab (every token, added ones included, so ids are the GGUF's) and merges."""
    vocab = {token: token_id for token_id, token in enumerate(tokens)}
    merges = []
    for line in metadata.get("tokenizer.ggml.merges") or []:
        left, sep, right = line.partition(" ")
        if not sep or left not in vocab or right not in vocab or left + right not in vocab:
            continue  # tokenizers rejects merges over unknown tokens; llama.cpp can never apply them
        merges.append([left, right])
    pre = str(metadata.get("tokenizer.ggml.pre") or "default")
    # Llama 3's tokenizer.json sets ignore_merges: a pre-token that is a whole vocab entry is taken as is.
    return _bpe_model(vocab, merges, ignore_merges=pre in LLAMA3_PRES)


def _sentencepiece_bpe_model(metadata: dict, tokens: list[str], types: list[int]) -> dict:
    """SentencePiece BPE as a Hugging Face BPE model with byte fallback.

    SentencePiece merges, at every step, the adjacent pair whose concatenation is the
    highest-scoring piece. Ranking the merges by the merged piece's score reproduces that, which
    is what Hugging Face's converter does: every split of a piece into two vocab pieces is a
    merge; merges are ordered by the merged piece's score (descending), then by the lengths of the
    left and right parts (longer first), then by piece id. Only normal pieces are merge results:
    SentencePiece never builds control, user-defined, unused or byte pieces by merging.
    """
    scores = metadata.get("tokenizer.ggml.scores")
    if scores is None or len(scores) != len(tokens):
        raise ValueError("GGUF SentencePiece tokenizer has no tokenizer.ggml.scores for every token")
    vocab = {token: token_id for token_id, token in enumerate(tokens)}
    # Parts must themselves be normal pieces (byte pieces like "<0x41>" are not text).
    mergeable = {token for token, token_type in zip(tokens, types) if token_type == TYPE_NORMAL}
    ranked: list[tuple[float, int, int, int, str, str]] = []
    for token_id, (piece, token_type) in enumerate(zip(tokens, types)):
        if token_type != TYPE_NORMAL or len(piece) < 2:
            continue
        score = -float(scores[token_id])
        for cut in range(1, len(piece)):
            left = piece[:cut]
            if left not in mergeable:
                continue
            right = piece[cut:]
            if right in mergeable:
                ranked.append((score, -cut, cut - len(piece), token_id, left, right))
    ranked.sort()
    merges = [[left, right] for *_, left, right in ranked]

    unk_id = metadata.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(tokens) else None
    return _bpe_model(vocab, merges, unk_token=unk, fuse_unk=True, byte_fallback=True)


def _sentencepiece_normalizer_decoder(add_space_prefix: bool) -> tuple[dict, dict]:
    """Normalizer (spaces to `▁`, plus a leading `▁` if the model adds one) and its inverse decoder."""
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE_SPACE}
    decoders: list[dict] = [
        {"type": "Replace", "pattern": {"String": SPIECE_SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if add_space_prefix:
        prepend = {"type": "Prepend", "prepend": SPIECE_SPACE}
        normalizer = {"type": "Sequence", "normalizers": [prepend, replace]}
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    else:
        normalizer = replace
    return normalizer, {"type": "Sequence", "decoders": decoders}
