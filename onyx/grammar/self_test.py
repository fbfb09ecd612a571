"""Tokenizer self-test: do the model's tokens write the bytes the grammar core assumes?

The grammar core builds its token masks from a `Vocabulary`: for every token id, the exact
bytes the token writes. Those bytes are derived from the tokenizer's token strings by family
rules (GPT-2's byte alphabet, SentencePiece's `▁` and `<0xNN>` tokens). If the tokenizer the
model actually runs with disagrees (a different file, a corrupted vocabulary, a special token
the vocabulary thinks is text), constrained decoding would produce output that does not match
the grammar, with nothing to show for it. `self_test` checks, once per tokenizer:

1. every ordinary token (one a grammar may allow): its string in the tokenizer, mapped by the
   family's rules, equals `vocab.token_bytes(id)`; and the tokenizer's own `decode` writes those
   bytes. Tokens that are not complete UTF-8 on their own are decoded between padding bytes
   that complete them (single-byte tokens), and a decoder that strips a leading space at the
   start of a sequence is allowed for (the token is decoded after a neutral anchor token).
2. special tokens: every id the tokenizer treats as special is special in the vocabulary, the
   vocabulary's EOS ids are special tokens of the tokenizer, and EOS ids the tokenizer declares
   are EOS ids of the vocabulary.
3. probe strings (ASCII, accents, CJK, ZWJ emoji, combining marks, whitespace, digits, JSON):
   encode → decode returns the same text, and the vocabulary's bytes of the encoded tokens
   concatenate to the text's UTF-8 bytes.

Results are cached under `cache_dir() / "selftest" / f"{tokenizer_hash}.json"`, failures
included, so a second run (in this process or the next) only hashes the tokenizer and the
vocabulary. A failing result warns (`TokenizerMismatchWarning`) or, with `strict=True`, raises
`TokenizerMismatchError`; it is never silent.

    report = self_test(vocab, tokenizer)            # warns on mismatch
    self_test(vocab, tokenizer, strict=True)        # raises on mismatch
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

from onyx._grammar import GrammarError  # not `from onyx`: onyx/__init__ may import this module
from onyx.grammar.spelling import byte_level_bytes, sentencepiece_bytes, show_bytes, utf8_padding

__all__ = [
    "Failure",
    "PROBES",
    "SelfTestReport",
    "TokenizerMismatchError",
    "TokenizerMismatchWarning",
    "self_test",
]

# Bump when the checks change: older cached results are then ignored.
SELFTEST_VERSION = 1

# At most this many failures of one kind are listed (a wholly wrong tokenizer would otherwise
# list every token); the rest are counted in one `truncated` failure.
MAX_FAILURES_PER_KIND = 50

# How many failures the warning / error message spells out.
SUMMARY_FAILURES = 5

PROBES: tuple[tuple[str, str], ...] = (
    ("ascii", "The quick brown fox jumps over the lazy dog."),
    ("accents", "café naïve résumé Ångström Æsir"),
    ("cjk", "日本語のテキスト、中文字符和한국어"),
    ("emoji_zwj", "👩\u200d💻 and 👨\u200d👩\u200d👧 🏳️\u200d🌈"),
    ("combining", "e\u0301 vs é, n\u0303a\u0308"),
    ("leading_spaces", "   leading spaces"),
    ("multiple_spaces", "a  b   c    d"),
    ("whitespace", "line one\nline two\r\n\ttabbed\t\tend\n\n"),
    ("digits", "0 12 345 6789 3.14159 -42 1e10 2024"),
    ("json", '{"name": "Onyx", "ok": true, "n": [1, 2.5, null], "s": "a\\"b\\\\c\\u00e9"}'),
    ("space_before_punctuation", "Hello , world . Don 't stop !"),
    ("trailing_spaces", "trailing spaces   "),
)


class TokenizerMismatchError(GrammarError):
    """The tokenizer and the grammar core's vocabulary disagree (`self_test(strict=True)`)."""

    def __init__(self, message: str, report: SelfTestReport | None = None):
        super().__init__(message)
        self.report = report


class TokenizerMismatchWarning(UserWarning):
    """The tokenizer and the grammar core's vocabulary disagree (`self_test(strict=False)`)."""


@dataclass(frozen=True)
class Failure:
    """One disagreement. `kind` is one of:

    `token_bytes` (the tokenizer's token string maps to other bytes than the vocabulary's),
    `token_decode` (the tokenizer decodes the token to other bytes), `missing_token` (the
    vocabulary allows an id the tokenizer has no token for), `special_ordinary` (a token the
    tokenizer treats as special is ordinary text for the grammar core), `special_out_of_range`,
    `eos_not_special`, `eos_mismatch`, `probe_roundtrip` (encode → decode changes a probe),
    `probe_bytes` (the vocabulary's bytes of a probe's tokens are not the probe),
    `probe_special`, `probe_error`, `truncated` (more failures of a kind than are listed).
    """

    kind: str
    token_id: int | None
    detail: str


@dataclass
class SelfTestReport:
    ok: bool
    tokenizer_hash: str
    checked_tokens: int
    failures: list[Failure] = field(default_factory=list)
    cached: bool = False

    def summary(self, limit: int = SUMMARY_FAILURES) -> str:
        if self.ok:
            return f"tokenizer self-test passed ({self.checked_tokens} tokens, hash {self.tokenizer_hash[:12]})"
        counts: dict[str, int] = {}
        for f in self.failures:
            if f.kind != "truncated":
                counts[f.kind] = counts.get(f.kind, 0) + 1
        kinds = ", ".join(f"{n} {k}" for k, n in counts.items())
        lines = [
            f"tokenizer self-test failed: the tokenizer disagrees with the grammar core's vocabulary "
            f"({kinds}; {self.checked_tokens} tokens checked, tokenizer hash {self.tokenizer_hash[:12]}"
            f"{', cached result' if self.cached else ''}). Constrained output would not match the grammar."
        ]
        for f in self.failures[:limit]:
            where = f"token {f.token_id}" if f.token_id is not None else "-"
            lines.append(f"  [{f.kind}] {where}: {f.detail}")
        if len(self.failures) > limit:
            lines.append(f"  ... and {len(self.failures) - limit} more")
        return "\n".join(lines)


def self_test(
    vocab: Any, tokenizer: Any, *, strict: bool = False, cache: bool = True, stacklevel: int = 2
) -> SelfTestReport:
    """Checks that `tokenizer` writes, token by token, the bytes `vocab` assumes.

    `tokenizer` is a `tokenizers.Tokenizer`, a transformers fast tokenizer, or mlx-lm's
    `TokenizerWrapper`. Returns the report; on failures warns with `TokenizerMismatchWarning`,
    or raises `TokenizerMismatchError` when `strict`. With `cache`, the result (pass or fail) is
    stored under `onyx.paths.cache_dir() / "selftest"` and reused for the same tokenizer and
    vocabulary. `stacklevel` is `warnings.warn`'s, counted from this function: the default
    points a warning at the caller's line; a wrapper passes 3 to point at its own caller's.
    """
    tok = _TokenizerView(tokenizer)
    table = _VocabTable(vocab)
    tokenizer_hash = _tokenizer_hash(tok, table)

    report = _load_cached(tokenizer_hash, table.fingerprint) if cache else None
    if report is None:
        report = _Checker(tok, table, tokenizer_hash).run()
        if cache:
            _store_cached(report, table.fingerprint, stacklevel + 1)

    if not report.ok:
        message = report.summary()
        if strict:
            raise TokenizerMismatchError(message, report)
        warnings.warn(message, TokenizerMismatchWarning, stacklevel=stacklevel)
    return report


# --- the tokenizer and the vocabulary, as the checks see them ---------------------------------


class _TokenizerView:
    """Uniform access to a `tokenizers.Tokenizer`, transformers fast tokenizer or mlx wrapper.

    `backend` (a `tokenizers.Tokenizer`) does the per-token work; `top` (the object the caller
    would decode with: the transformers tokenizer if there is one) encodes and decodes probes.
    """

    def __init__(self, tokenizer: Any):
        self.declared_eos: set[int] = set()
        self.extra_special: set[int] = set()
        tok = tokenizer
        # mlx-lm's TokenizerWrapper wraps the transformers tokenizer in `_tokenizer` (as
        # `Vocabulary.from_hf` unwraps it).
        if hasattr(tok, "_tokenizer") and not hasattr(tok, "backend_tokenizer") and not hasattr(tok, "to_str"):
            self.declared_eos |= _int_set(getattr(tok, "eos_token_ids", None))
            tok = tok._tokenizer
        self.top = tok
        if hasattr(tok, "backend_tokenizer"):
            self.backend = tok.backend_tokenizer
            self.is_transformers = True
            self.declared_eos |= _int_set(getattr(tok, "eos_token_id", None))
            # mlx-lm's TokenizerWrapper forwards unknown attributes to the transformers tokenizer
            # (so it lands here) and has its own `eos_token_ids`.
            self.declared_eos |= _int_set(getattr(tok, "eos_token_ids", None))
            self.extra_special |= _int_set(getattr(tok, "all_special_ids", None))
            try:
                for i, added in dict(getattr(tok, "added_tokens_decoder", {}) or {}).items():
                    if getattr(added, "special", False):
                        self.extra_special.add(int(i))
            except Exception:  # noqa: BLE001 - an odd tokenizer class; the backend still has its specials
                pass
        elif hasattr(tok, "to_str") and hasattr(tok, "decode_batch"):
            self.backend = tok
            self.is_transformers = False
        else:
            raise TypeError(
                "self_test needs a tokenizers.Tokenizer, a transformers fast tokenizer or mlx-lm's "
                f"TokenizerWrapper, not {type(tokenizer).__name__}"
            )
        self.added = {int(i): a for i, a in self.backend.get_added_tokens_decoder().items()}
        self.special_ids = {i for i, a in self.added.items() if a.special} | self.extra_special

    def serialized(self) -> str:
        return self.backend.to_str()

    def wrapper_config(self) -> str:
        """What outside the backend's JSON changes the checks' outcome."""
        top = self.top
        clean_up = self.is_transformers and bool(getattr(top, "clean_up_tokenization_spaces", False))
        return json.dumps({
            "class": type(top).__name__ if self.is_transformers else "tokenizers.Tokenizer",
            "clean_up_tokenization_spaces": clean_up,
            "declared_eos": sorted(self.declared_eos),
            "extra_special": sorted(self.extra_special),
        }, sort_keys=True)

    def encode(self, text: str) -> list[int]:
        if self.is_transformers:
            return list(self.top.encode(text, add_special_tokens=False))
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        if self.is_transformers:
            return self.top.decode(ids, skip_special_tokens=False)
        return self.backend.decode(ids, skip_special_tokens=False)

    def content(self, token_id: int) -> str | None:
        added = self.added.get(token_id)
        if added is not None:
            return added.content
        return self.backend.id_to_token(token_id)


def _int_set(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, int):
        return {int(value)}
    try:
        return {int(v) for v in value if v is not None}
    except TypeError:
        return set()


class _VocabTable:
    """The vocabulary's bytes and flags for every id, read once, and their fingerprint."""

    def __init__(self, vocab: Any):
        self.vocab = vocab
        self.size = int(vocab.size)
        self.family = str(vocab.family)
        self.eos = [int(e) for e in vocab.eos_token_ids]
        token_bytes, is_special = vocab.token_bytes, vocab.is_special
        self.bytes: list[bytes] = [token_bytes(i) for i in range(self.size)]
        self.special: list[bool] = [is_special(i) for i in range(self.size)]
        h = hashlib.sha256()
        h.update(json.dumps([self.size, self.family, self.eos]).encode())
        h.update(bytes(self.special))
        h.update(array("I", map(len, self.bytes)).tobytes())
        h.update(b"".join(self.bytes))
        self.fingerprint = h.hexdigest()

    def ordinary_ids(self) -> list[int]:
        special = self.special
        return [i for i in range(self.size) if not special[i]]


def _tokenizer_hash(tok: _TokenizerView, table: _VocabTable) -> str:
    h = hashlib.sha256()
    h.update(f"onyx-tokenizer-selftest-v{SELFTEST_VERSION}\0".encode())
    h.update(tok.serialized().encode("utf-8"))
    h.update(b"\0" + tok.wrapper_config().encode())
    h.update(b"\0" + json.dumps({"vocab_size": table.size, "eos": table.eos}).encode())
    return h.hexdigest()


# --- the checks --------------------------------------------------------------------------------


class _Checker:
    def __init__(self, tok: _TokenizerView, table: _VocabTable, tokenizer_hash: str):
        self.tok = tok
        self.table = table
        self.hash = tokenizer_hash
        self.failures: list[Failure] = []
        self.dropped: dict[str, int] = {}
        self.kind_counts: dict[str, int] = {}

    def fail(self, kind: str, token_id: int | None, detail: str) -> None:
        n = self.kind_counts.get(kind, 0) + 1
        self.kind_counts[kind] = n
        if n <= MAX_FAILURES_PER_KIND:
            self.failures.append(Failure(kind, token_id, detail))
        else:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1

    def run(self) -> SelfTestReport:
        checked = self.check_tokens()
        self.check_specials()
        self.check_probes()
        for kind, n in self.dropped.items():
            self.failures.append(Failure("truncated", None, f"{n} more {kind} failures not listed"))
        return SelfTestReport(not self.failures, self.hash, checked, self.failures)

    # 1. ordinary tokens

    def check_tokens(self) -> int:
        tok, table = self.tok, self.table
        family = table.family
        to_bytes = {"byte_level": byte_level_bytes, "sentencepiece": sentencepiece_bytes}.get(family)
        added = tok.added
        id_to_token = tok.backend.id_to_token
        vb = table.bytes

        ordinary = table.ordinary_ids()
        present: list[int] = []
        mapped_ok: set[int] = set()
        for i in ordinary:
            a = added.get(i)
            if a is not None:
                s, expected = a.content, a.content.encode("utf-8")
            else:
                s = id_to_token(i)
                if s is None:
                    self.fail(
                        "missing_token", i,
                        f"the vocabulary allows id {i} (bytes {show_bytes(vb[i])}) but the tokenizer has no such token",
                    )
                    continue
                expected = to_bytes(s) if to_bytes is not None else s.encode("utf-8")
            present.append(i)
            if expected == vb[i]:
                mapped_ok.add(i)
            else:
                self.fail(
                    "token_bytes", i,
                    f"tokenizer token {s!r} writes {show_bytes(expected)} by the {family} rules, "
                    f"the grammar core assumes {show_bytes(vb[i])}",
                )

        # Single-byte tokens that pass the mapping check: padding for partial UTF-8 tokens, and
        # the anchor put in front of a token whose decode starts a sequence.
        byte_token: dict[int, int] = {}
        for i in ordinary:
            b = vb[i]
            if len(b) == 1 and i in mapped_ok and b[0] not in byte_token:
                byte_token[b[0]] = i
        anchor = next((byte_token[c] for c in b"axqz0" if c in byte_token), None)

        seqs: list[list[int]] = []
        texts: list[str] = []
        owners: list[int] = []
        for i in present:
            b = vb[i]
            try:
                texts.append(b.decode("utf-8"))
                seqs.append([i])
            except UnicodeDecodeError:
                pad = utf8_padding(b)
                if pad is None or any(c not in byte_token for c in pad[0] + pad[1]):
                    continue  # not decodable to text in any context; the mapping check covers it
                pre, suf = pad
                seqs.append([byte_token[c] for c in pre] + [i] + [byte_token[c] for c in suf])
                texts.append((pre + b + suf).decode("utf-8"))
            owners.append(i)

        decoded = tok.backend.decode_batch(seqs, skip_special_tokens=False)
        bad = [k for k in range(len(seqs)) if decoded[k] != texts[k]]
        if bad and anchor is not None:
            # Decoders may strip a leading space at the start of a sequence: decode after an anchor.
            anchor_text = tok.backend.decode([anchor], skip_special_tokens=False)
            again = tok.backend.decode_batch([[anchor] + seqs[k] for k in bad], skip_special_tokens=False)
            bad = [k for k, d in zip(bad, again) if d != anchor_text + texts[k]]
        for k in bad:
            i = owners[k]
            got = decoded[k].encode("utf-8")
            want = texts[k].encode("utf-8")
            context = "" if seqs[k] == [i] else f" (decoded as {seqs[k]}, padded to complete UTF-8)"
            self.fail(
                "token_decode", i,
                f"the tokenizer decodes it to {show_bytes(got)}, the grammar core assumes {show_bytes(want)}{context}",
            )
        return len(present)

    # 2. special tokens

    def check_specials(self) -> None:
        tok, table = self.tok, self.table
        for i in sorted(tok.special_ids):
            name = tok.content(i)
            if i >= table.size:
                self.fail(
                    "special_out_of_range", i,
                    f"the tokenizer's special token {name!r} has id {i}, outside the vocabulary of {table.size}",
                )
            elif not table.special[i]:
                self.fail(
                    "special_ordinary", i,
                    f"the tokenizer treats {name!r} as special, but the grammar core treats it as ordinary "
                    f"text {show_bytes(table.bytes[i])} that a grammar may allow",
                )
        for e in table.eos:
            if not table.special[e]:
                self.fail("eos_not_special", e, f"EOS id {e} is not special in the vocabulary")
            if e not in tok.special_ids:
                self.fail(
                    "eos_not_special", e,
                    f"the vocabulary's EOS id {e} ({tok.content(e)!r}) is not a special token of the tokenizer",
                )
        for e in sorted(tok.declared_eos - set(table.eos)):
            self.fail(
                "eos_mismatch", e,
                f"the tokenizer declares EOS id {e} ({tok.content(e)!r}), which is not among the "
                f"vocabulary's EOS ids {table.eos}: a grammar would never let the model stop with it",
            )

    # 3. probe strings

    def check_probes(self) -> None:
        tok, table = self.tok, self.table
        # A tokenizer may prepend a space to the text it encodes (SentencePiece's dummy prefix);
        # its decode then removes it. The bytes of the tokens then start with that space.
        try:
            ids = tok.encode("a")
            prefix = b" " if b"".join(table.bytes[i] for i in ids if i < table.size) == b" a" else b""
        except Exception:  # noqa: BLE001 - reported by the probes themselves
            prefix = b""
        for name, text in PROBES:
            want = text.encode("utf-8")
            try:
                ids = tok.encode(text)
                back = tok.decode(ids)
            except Exception as e:  # noqa: BLE001 - a tokenizer that cannot round-trip is a failure
                self.fail("probe_error", None, f"probe {name} {text!r}: {type(e).__name__}: {e}")
                continue
            if back != text:
                self.fail(
                    "probe_roundtrip", None,
                    f"probe {name}: encode → decode gives {show_bytes(back.encode('utf-8'))}, "
                    f"expected {show_bytes(want)} (ids {ids})",
                )
            expected = prefix + want
            pos = 0
            for i in ids:
                if i >= table.size:
                    self.fail(
                        "probe_bytes", i,
                        f"probe {name}: token {i} is outside the vocabulary of {table.size} (ids {ids})",
                    )
                    break
                b = table.bytes[i]
                if table.special[i]:
                    self.fail(
                        "probe_special", i,
                        f"probe {name}: the tokenizer encodes it with token {i} ({show_bytes(b)}), which a grammar "
                        f"never allows (ids {ids})",
                    )
                    break
                if expected[pos:pos + len(b)] != b:
                    self.fail(
                        "probe_bytes", i,
                        f"probe {name}: at byte {pos} the grammar core's bytes for token {i} are {show_bytes(b)}, the "
                        f"text has {show_bytes(expected[pos:pos + max(len(b), 1)])} (ids {ids})",
                    )
                    break
                pos += len(b)
            else:
                if pos != len(expected):
                    self.fail(
                        "probe_bytes", None,
                        f"probe {name}: the tokens' bytes cover {pos} of {len(expected)} bytes (ids {ids})",
                    )


# --- cache ---------------------------------------------------------------------------------------


def _cache_path(tokenizer_hash: str):
    from onyx.paths import cache_dir

    return cache_dir() / "selftest" / f"{tokenizer_hash}.json"


def _load_cached(tokenizer_hash: str, fingerprint: str) -> SelfTestReport | None:
    path = _cache_path(tokenizer_hash)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if (
            data.get("version") != SELFTEST_VERSION
            or data.get("tokenizer_hash") != tokenizer_hash
            or data.get("vocab_fingerprint") != fingerprint
        ):
            return None
        failures = [
            Failure(str(f["kind"]), None if f["token_id"] is None else int(f["token_id"]), str(f["detail"]))
            for f in data["failures"]
        ]
        ok = bool(data["ok"]) and not failures
        return SelfTestReport(ok, tokenizer_hash, int(data["checked_tokens"]), failures, cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store_cached(report: SelfTestReport, fingerprint: str, stacklevel: int) -> None:
    path = _cache_path(report.tokenizer_hash)
    data = {
        "version": SELFTEST_VERSION,
        "tokenizer_hash": report.tokenizer_hash,
        "vocab_fingerprint": fingerprint,
        "ok": report.ok,
        "checked_tokens": report.checked_tokens,
        "failures": [asdict(f) for f in report.failures],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".selftest-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as e:
        warnings.warn(f"could not cache the tokenizer self-test in {path}: {e}", RuntimeWarning, stacklevel=stacklevel)
