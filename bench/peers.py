"""Onyx and the peer grammar libraries (outlines-core, xgrammar, llguidance) behind one small
interface, on the same vocabulary, so benches compare like with like.

`VocabData` is a vocabulary as Onyx reads it from a GGUF file (special tokens, EOS included, are
empty byte strings); every adapter is built from one. An adapter offers

    compile(kind, spec)          kind "regex" (spec a regex), "schema" (a JSON Schema dict),
                                 JSON configured for compact output ("," and ":", no whitespace),
                                 or "gbnf" (spec a file of llama.cpp's grammars, see `load_spec`)
    matcher(compiled)            a `Matcher` at the start: mask() -> the allowed-token bitmask as
                                 uint32 words (bit i of word i // 32: token i), advance(token)
                                 (raises ValueError when the library rejects it), is_accepting()
    timed_walk(compiled, tokens) ns per step (mask + advance; the last step: the final state's
                                 mask only), timed in a loop of the library's own calls
    split_walk(compiled, tokens, deadline_ns)
                                 ns of each mask and of each advance, timed apart, and why the walk
                                 stopped early: {"at": tokens taken, "why": "rejected"} at the first
                                 token the library rejects, "time" once perf_counter_ns passes
                                 deadline_ns; None when it went to the end
    build(kind, spec)            the upfront ("eager") work; None (no method) for a lazy library
    memory(compiled)             (bytes or None, what the number is)

`first_mask(adapter, kind, spec)` times compile + first mask. For a timeout, run an adapter in a
`harness.Worker(open_adapter, (engine, vocab), timeout)`: `compile_task` is a call for it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import time

import numpy as np

from bench import harness
from bench.corpus import VOCABS
from bench.peer_adapters import (NO_DEADLINE, Adapter, LLGuidanceAdapter, Matcher, OnyxAdapter, OutlinesAdapter,
                                 XGrammarAdapter, _OnyxGuide, load_spec, onyx_compile, xgrammar_ebnf)

__all__ = ["ADAPTERS", "ENGINES", "NO_DEADLINE", "Adapter", "Matcher", "VocabData", "check_walk", "compile_task",
           "first_mask", "load_spec", "onyx_compile", "open_adapter", "peer_available", "versions", "xgrammar_ebnf"]

PEER_PACKAGES = {"outlines-core": "outlines_core", "xgrammar": "xgrammar", "llguidance": "llguidance"}
ENGINES = ["onyx", "outlines-core", "xgrammar", "llguidance"]


@functools.lru_cache(maxsize=None)
def peer_available(engine: str) -> str | None:
    """None when the engine can run here, else why not."""
    if engine == "onyx":
        return None
    pkg = PEER_PACKAGES[engine]
    if importlib.util.find_spec(pkg) is None:
        return f"{pkg} is not installed (pip install {engine})"
    return None


# --------------------------------------------------------------------------------------------
# The vocabulary every engine sees
# --------------------------------------------------------------------------------------------


class VocabData:
    """Token bytes as Onyx reads them; special tokens (EOS included) become b""."""

    def __init__(self, name: str):
        import onyx
        from onyx.models import assets

        path = assets.asset_path(VOCABS[name])
        if not path.is_file():
            raise SystemExit(f"{path} is missing: run `python -m onyx.models.assets fetch {VOCABS[name]}`")
        self.name = name
        self.onyx_vocab = onyx.Vocabulary.from_gguf(str(path))
        v = self.onyx_vocab
        self.size = v.size
        self.words = (self.size + 31) // 32
        self.eos = list(v.eos_token_ids)
        self.special = [i for i in range(self.size) if v.is_special(i)]
        sp = set(self.special) | set(self.eos)
        self.tokens = [b"" if i in sp else v.token_bytes(i) for i in range(self.size)]
        self.by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.tokens):
            if b:
                self.by_bytes.setdefault(b, []).append(i)
        self.max_len = max(len(b) for b in self.by_bytes)
        # Bits compared across engines: real ids, EOS excluded (peers differ in how many EOS ids
        # they take: outlines-core takes exactly one).
        keep = np.zeros(self.words * 32, dtype=np.uint8)
        keep[: self.size] = 1
        keep[self.eos] = 0
        self.keep = np.packbits(keep, bitorder="little").view(np.uint32)

    def greedy(self, data: bytes, allowed=None) -> list[int]:
        """Longest-match tokenization; `allowed() -> set|None` filters candidates and
        `allowed.take(token)` hears each token chosen."""
        out, pos = [], 0
        while pos < len(data):
            ok = allowed() if allowed else None
            for n in range(min(self.max_len, len(data) - pos), 0, -1):
                ids = self.by_bytes.get(data[pos:pos + n])
                if not ids:
                    continue
                if ok is not None:
                    ids = [i for i in ids if i in ok]
                    if not ids:
                        continue
                tok = ids[0]
                out.append(tok)
                pos += n
                if allowed:
                    allowed.take(tok)
                break
            else:
                raise ValueError(f"no token fits {data[pos:pos + 16]!r} at byte {pos}")
        return out

    def tokenize_sample(self, kind: str, spec, sample: str) -> tuple[list[int], str]:
        """Tokens of `sample` (and how they were chosen), each checked against Onyx's mask when
        Onyx compiles the pattern, so every engine walks the same valid path."""
        data = sample.encode()
        try:
            g = onyx_compile(self.onyx_vocab, kind, spec)
        except Exception as e:  # noqa: BLE001 - the walk is still defined without Onyx
            return self.greedy(data), f"plain greedy (Onyx could not compile: {type(e).__name__}: {e})"
        guide = _OnyxGuide(g)
        toks = self.greedy(data, guide)
        if not g.is_accepting(guide.state):
            raise ValueError(f"sample {sample!r} does not complete the pattern under Onyx")
        return toks, "greedy, each token checked against Onyx's mask"

    def mask_signature(self, words: np.ndarray) -> tuple[int, str, bool, bytes]:
        """(allowed count without EOS, hash of those bits, any EOS allowed, those bits)."""
        w = np.asarray(words).view(np.uint32)
        kept = w & self.keep
        count = int(np.unpackbits(kept.view(np.uint8)).sum())
        eos = any((int(w[e // 32]) >> (e % 32)) & 1 for e in self.eos)
        raw = kept.tobytes()
        return count, hashlib.sha1(raw).hexdigest()[:16], eos, raw


ADAPTERS = {"onyx": OnyxAdapter, "outlines-core": OutlinesAdapter,
            "xgrammar": XGrammarAdapter, "llguidance": LLGuidanceAdapter}


# --------------------------------------------------------------------------------------------
# Using an adapter
# --------------------------------------------------------------------------------------------


def first_mask(adapter: Adapter, kind: str, spec) -> dict:
    """Compile, then the first mask: seconds to compile, seconds to the first mask (both from
    the start), and the compiled object."""
    pc = time.perf_counter
    t0 = pc()
    compiled = adapter.compile(kind, spec)
    t1 = pc()
    adapter.matcher(compiled).mask()
    t2 = pc()
    return {"compile": t1 - t0, "first_mask": t2 - t0, "obj": compiled}


def check_walk(adapter: Adapter, compiled, tokens: list[int]) -> tuple[list[tuple], bool]:
    """Untimed walk: each state's `VocabData.mask_signature` (the final state's included) and
    whether the walk ends accepting. Raises when the engine rejects a token."""
    m = adapter.matcher(compiled)
    sigs = []
    for tok in tokens:
        sigs.append(adapter.vd.mask_signature(m.mask()))
        m.advance(tok)
    sigs.append(adapter.vd.mask_signature(m.mask()))
    return sigs, m.is_accepting()


def open_adapter(engine: str, vocab_name: str) -> tuple[Adapter, dict]:
    """The adapter for `engine` on vocabulary `vocab_name` (a key of corpus.VOCABS), after a
    warm-up compile (one-time per-vocabulary work is not charged to the first measurement), and
    what its setup took. The `setup` of a `harness.Worker`."""
    t0 = time.perf_counter()
    vd = VocabData(vocab_name)
    t1 = time.perf_counter()
    adapter = ADAPTERS[engine](vd)
    t2 = time.perf_counter()
    info = {"vocab_load_ms": (t1 - t0) * 1e3, "engine_setup_ms": (t2 - t1) * 1e3}
    if engine == "xgrammar":
        info["torch_stub"] = adapter.torch_stub
    try:
        first_mask(adapter, "regex", r"[a-z]{2}")
    except Exception:  # noqa: BLE001 - a warm-up only: the measurements report real errors
        pass
    info["warmup_compile_ms"] = (time.perf_counter() - t2) * 1e3
    return adapter, info


def compile_task(adapter: Adapter, task: dict) -> dict:
    """A `harness.Worker` call: compile task["spec"] (task["kind"]: "regex" or "schema") and
    produce the first mask; milliseconds for each."""
    r = first_mask(adapter, task["kind"], task["spec"])
    return {"compile_ms": r["compile"] * 1e3, "first_mask_ms": r["first_mask"] * 1e3}


def versions() -> dict:
    return {d: harness.package_version(d) for d in ["onyx", "llguidance", "outlines-core", "xgrammar", "numpy", "torch"]}
