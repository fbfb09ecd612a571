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
import json
import os
import re
import sys
import time

import numpy as np

from bench import harness
from bench.corpus import GBNF_ASSET, VOCABS

PEER_PACKAGES = {"outlines-core": "outlines_core", "xgrammar": "xgrammar", "llguidance": "llguidance"}
ENGINES = ["onyx", "outlines-core", "xgrammar", "llguidance"]


@functools.lru_cache(maxsize=None)
def _gbnf_text(name: str) -> str:
    from onyx.models import assets

    return (assets.fetch(GBNF_ASSET, quiet=True) / name).read_text()


def load_spec(kind: str, spec):
    """What an engine compiles for a pattern: a "gbnf" pattern names a file of llama.cpp's
    grammars (the `llama-cpp-grammars` asset, fetched into Onyx's cache on first use, never kept
    in the repository); other specs are used as they are."""
    return _gbnf_text(spec) if kind == "gbnf" else spec


def onyx_compile(vocab, kind: str, spec):
    if kind == "regex":
        return vocab.compile_regex(spec)
    if kind == "gbnf":
        return vocab.compile_gbnf(load_spec(kind, spec))
    return vocab.compile_json_schema(spec)


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


class _OnyxGuide:
    """Steers greedy tokenization so every token is one Onyx's mask allows."""

    def __init__(self, g):
        self.g, self.state = g, g.initial_state

    def __call__(self):
        return set(self.g.allowed_token_ids(self.state).tolist())

    def take(self, tok):
        self.state = self.g.advance(self.state, tok)


# --------------------------------------------------------------------------------------------
# Adapters
# --------------------------------------------------------------------------------------------


class Matcher:
    """One walk through a compiled grammar: `mask`, `advance` and `is_accepting` are set by the
    adapter that makes it."""

    def __init__(self, mask, advance, is_accepting):
        self.mask, self.advance, self.is_accepting = mask, advance, is_accepting


NO_DEADLINE = 1 << 62


class Adapter:
    name = "?"
    eager_note = ""
    # True when compiling is the eager build (outlines-core's Index): a bench reuses the compile
    # timing and the compiled object rather than compiling again.
    eager_by_nature = False

    def __init__(self, vd: VocabData):
        self.vd = vd
        self.words = vd.words

    def compile(self, kind: str, spec):
        raise NotImplementedError

    def matcher(self, compiled) -> Matcher:
        raise NotImplementedError

    def timed_walk(self, compiled, tokens: list[int]) -> list[int]:
        """Each adapter writes this loop with its library's own calls, bound to locals: a loop
        shared through `Matcher` would add Python calls to every step it measures."""
        raise NotImplementedError

    def split_walk(self, compiled, tokens: list[int], deadline_ns: int = NO_DEADLINE) -> tuple[list[int], list[int], dict | None]:
        raise NotImplementedError(f"{self.name}: no split walk")

    build = None  # a method in the adapters of libraries with an eager build

    def memory(self, compiled) -> tuple[int | None, str]:
        return None, "n/a"


class OnyxAdapter(Adapter):
    name = "onyx"
    eager_note = "compile + build_all()"

    def compile(self, kind, spec):
        return onyx_compile(self.vd.onyx_vocab, kind, spec)

    def build(self, kind, spec):
        g = self.compile(kind, spec)
        g.build_all()
        return g

    def matcher(self, g):
        state = [g.initial_state]

        def advance(tok):
            m = g.token_bitmask(state[0])
            if not (int(m[tok // 32]) >> (tok % 32)) & 1:
                raise ValueError(f"token {tok} not in Onyx's mask")
            state[0] = g.advance(state[0], tok)

        return Matcher(lambda: g.token_bitmask(state[0]), advance, lambda: bool(g.is_accepting(state[0])))

    def timed_walk(self, g, tokens):
        mask, adv = g.token_bitmask, g.advance
        s = g.initial_state
        pc = time.perf_counter_ns
        out = []
        for tok in tokens:
            t0 = pc()
            mask(s)
            s = adv(s, tok)
            t1 = pc()
            out.append(t1 - t0)
        t0 = pc()
        mask(s)
        out.append(pc() - t0)
        return out

    def split_walk(self, g, tokens, deadline_ns=NO_DEADLINE):
        mask, adv = g.token_bitmask, g.advance
        s = g.initial_state
        pc = time.perf_counter_ns
        m_ns, a_ns = [], []
        for i, tok in enumerate(tokens):
            t0 = pc()
            mask(s)
            t1 = pc()
            m_ns.append(t1 - t0)
            if t1 > deadline_ns:
                return m_ns, a_ns, {"at": i, "why": "time"}
            try:
                s = adv(s, tok)
            except ValueError:
                return m_ns, a_ns, {"at": i, "why": "rejected"}
            a_ns.append(pc() - t1)
        t0 = pc()
        mask(s)
        m_ns.append(pc() - t0)
        return m_ns, a_ns, None

    def memory(self, g):
        g.build_all()
        return int(g.memory_bytes), "memory_bytes after build_all"


class OutlinesAdapter(Adapter):
    name = "outlines-core"
    eager_note = "Index construction (eager by nature)"
    eager_by_nature = True

    def __init__(self, vd):
        super().__init__(vd)
        import outlines_core as oc

        self.oc = oc
        self.vocab = oc.Vocabulary(vd.eos[0], dict(vd.by_bytes))

    def regex_of(self, kind, spec):
        if kind == "regex":
            return spec
        if kind == "gbnf":
            raise NotImplementedError("outlines-core takes regexes and JSON Schemas, not GBNF")
        return self.oc.json_schema.build_regex_from_schema(json.dumps(spec), whitespace_pattern="")

    def compile(self, kind, spec):
        return self.oc.Index(self.regex_of(kind, spec), self.vocab)

    def build(self, kind, spec):
        return self.compile(kind, spec)

    def matcher(self, idx):
        guide = self.oc.Guide(idx)
        buf = np.zeros(self.words, dtype=np.int32)

        def mask():
            guide.write_mask_into(buf.ctypes.data, self.words, 4)
            return buf.view(np.uint32)

        return Matcher(mask, lambda tok: guide.advance(tok, return_tokens=False), lambda: bool(guide.is_finished()))

    def timed_walk(self, idx, tokens):
        guide = self.oc.Guide(idx)
        buf = np.zeros(self.words, dtype=np.int32)
        ptr, n = buf.ctypes.data, self.words
        write, adv = guide.write_mask_into, guide.advance
        pc = time.perf_counter_ns
        out = []
        for tok in tokens:
            t0 = pc()
            write(ptr, n, 4)
            adv(tok, False)
            t1 = pc()
            out.append(t1 - t0)
        t0 = pc()
        write(ptr, n, 4)
        out.append(pc() - t0)
        return out

    def memory(self, idx):
        import pickle

        return len(pickle.dumps(idx)), "pickled Index size (no in-memory size in the API)"


_GBNF_QUOTED = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|#[^\n]*')
_EMPTY_ALT = re.compile(r'(::=|\||\()([ \t]*)(?=[|)])')


def xgrammar_ebnf(gbnf: str) -> str:
    """A GBNF text as XGrammar's EBNF reader takes it: XGrammar wants an empty alternative
    written `""`, where GBNF may leave it empty (`ws ::= | " "`). Only that is rewritten, and
    only outside strings, character classes and comments."""
    out, pos = [], 0
    for m in _GBNF_QUOTED.finditer(gbnf):
        out.append(_EMPTY_ALT.sub(r'\1\2"" ', gbnf[pos:m.start()]))
        out.append(m.group())
        pos = m.end()
    out.append(_EMPTY_ALT.sub(r'\1\2"" ', gbnf[pos:]))
    return "".join(out)


def _import_xgrammar():
    """xgrammar imports torch at module level but only uses it for tensor helpers; masks are
    filled through DLPack, which numpy arrays support. PyPI's torch for Linux pulls in several GB
    of CUDA wheels, so when torch is absent a stand-in module is put in its place (in this
    process: run xgrammar in a worker process)."""
    import importlib.machinery
    import types

    try:
        import transformers  # noqa: F401 - imported before the stand-in so it sees no torch
    except ImportError:
        pass
    stub = False
    if importlib.util.find_spec("torch") is None:
        class _Anything:
            def __init__(self, *a, **k):
                pass

            def __call__(self, *a, **k):
                return _Anything()

            def __getattr__(self, name):
                return _Anything()

        torch = types.ModuleType("torch")
        torch.__getattr__ = lambda name: _Anything if name == "Tensor" else _Anything()
        torch.__path__ = []
        torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
        sys.modules["torch"] = torch
        stub = True
    import xgrammar

    return xgrammar, stub


class XGrammarAdapter(Adapter):
    name = "xgrammar"
    eager_note = "compile (its upfront work; no full mask build)"

    def __init__(self, vd):
        super().__init__(vd)
        self.xgr, self.torch_stub = _import_xgrammar()
        xgr = self.xgr
        self.info = xgr.TokenizerInfo(list(vd.tokens), vocab_type=xgr.VocabType.RAW,
                                      vocab_size=vd.size, stop_token_ids=list(vd.eos),
                                      add_prefix_space=False)
        # No cache: every compile is a real compile. Threads = the machine's cores.
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=os.cpu_count() or 2,
                                            cache_enabled=False)

    def compile(self, kind, spec):
        if kind == "regex":
            return self.compiler.compile_regex(spec)
        if kind == "gbnf":
            return self.compiler.compile_grammar(xgrammar_ebnf(load_spec(kind, spec)), root_rule_name="root")
        return self.compiler.compile_json_schema(json.dumps(spec), any_whitespace=False,
                                                 separators=(",", ":"), strict_mode=True)

    def build(self, kind, spec):
        return self.compile(kind, spec)

    def matcher(self, cg):
        m = self.xgr.GrammarMatcher(cg)
        buf = np.zeros((1, self.words), dtype=np.int32)

        def mask():
            m.fill_next_token_bitmask(buf)
            return buf[0].view(np.uint32)

        def advance(tok):
            if not m.accept_token(tok):
                raise ValueError(f"xgrammar rejected token {tok}")

        return Matcher(mask, advance, lambda: bool(m.accept_token(self.vd.eos[0])))

    def timed_walk(self, cg, tokens):
        m = self.xgr.GrammarMatcher(cg)
        buf = np.zeros((1, self.words), dtype=np.int32)
        fill, acc = m.fill_next_token_bitmask, m.accept_token
        pc = time.perf_counter_ns
        out = []
        for tok in tokens:
            t0 = pc()
            fill(buf)
            ok = acc(tok)
            t1 = pc()
            if not ok:
                raise ValueError(f"xgrammar rejected token {tok}")
            out.append(t1 - t0)
        t0 = pc()
        fill(buf)
        out.append(pc() - t0)
        return out

    def split_walk(self, cg, tokens, deadline_ns=NO_DEADLINE):
        m = self.xgr.GrammarMatcher(cg)
        buf = np.zeros((1, self.words), dtype=np.int32)
        fill, acc = m.fill_next_token_bitmask, m.accept_token
        pc = time.perf_counter_ns
        m_ns, a_ns = [], []
        for i, tok in enumerate(tokens):
            t0 = pc()
            fill(buf)
            t1 = pc()
            m_ns.append(t1 - t0)
            if t1 > deadline_ns:
                return m_ns, a_ns, {"at": i, "why": "time"}
            ok = acc(tok)
            t2 = pc()
            if not ok:
                return m_ns, a_ns, {"at": i, "why": "rejected"}
            a_ns.append(t2 - t1)
        t0 = pc()
        fill(buf)
        m_ns.append(pc() - t0)
        return m_ns, a_ns, None

    def memory(self, cg):
        return int(cg.memory_size_bytes), "CompiledGrammar.memory_size_bytes"


class _LLGTokenizer:
    """What llguidance's TokenizerWrapper reads: token bytes, EOS/BOS, special ids, encode."""

    def __init__(self, vd: VocabData):
        self.vd = vd
        self.tokens = vd.tokens
        self.eos_token_id = vd.eos[0]
        self.bos_token_id = None
        self.special_token_ids = sorted(set(vd.special) | set(vd.eos))

    def __call__(self, data):
        if isinstance(data, str):
            data = data.encode()
        return self.vd.greedy(data)


class LLGuidanceAdapter(Adapter):
    """llguidance compiles into a matcher (LLMatcher); `matcher` and `timed_walk` reset it."""

    name = "llguidance"
    eager_note = "n/a: lazy (masks computed per step)"

    def __init__(self, vd):
        super().__init__(vd)
        import llguidance as llg

        self.llg = llg
        self.tok = llg.LLTokenizer(llg.TokenizerWrapper(_LLGTokenizer(vd)), n_vocab=vd.size,
                                   eos_token=list(vd.eos))

    def grammar(self, kind, spec):
        M = self.llg.LLMatcher
        if kind == "regex":
            return M.grammar_from_regex(spec)
        if kind == "gbnf":
            # llguidance's own GBNF reader (translated to its Lark dialect)
            return self.llg.grammar_from("gbnf", load_spec(kind, spec))
        return M.grammar_from_json_schema(spec, overrides={
            "whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})

    def compile(self, kind, spec):
        m = self.llg.LLMatcher(self.tok, self.grammar(kind, spec), log_level=0)
        if m.is_error():
            raise RuntimeError(f"llguidance: {m.get_error()}")
        return m

    def matcher(self, m):
        m = m.deep_copy()  # as in split_walk: the compiled matcher itself is never consumed
        buf = np.zeros(self.words, dtype=np.int32)

        def mask():
            m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)
            return buf.view(np.uint32)

        def advance(tok):
            if not m.consume_token(tok):
                raise ValueError(f"llguidance rejected token {tok}: {m.get_error()}")

        return Matcher(mask, advance, lambda: bool(m.is_accepting()))

    def timed_walk(self, m, tokens):
        m.reset()
        buf = np.zeros(self.words, dtype=np.int32)
        ptr, nb = buf.ctypes.data, buf.nbytes
        fill, cons = m.unsafe_compute_mask_ptr, m.consume_token
        pc = time.perf_counter_ns
        out = []
        for tok in tokens:
            t0 = pc()
            fill(ptr, nb)
            ok = cons(tok)
            t1 = pc()
            if not ok:
                raise ValueError(f"llguidance rejected token {tok}: {m.get_error()}")
            out.append(t1 - t0)
        t0 = pc()
        fill(ptr, nb)
        out.append(pc() - t0)
        if m.is_error():
            raise ValueError(f"llguidance: {m.get_error()}")
        return out

    def split_walk(self, m, tokens, deadline_ns=NO_DEADLINE):
        # A copy (sharing the grammar and its caches): a rejected token leaves a matcher in an
        # error that reset() does not clear.
        m = m.deep_copy()
        buf = np.zeros(self.words, dtype=np.int32)
        ptr, nb = buf.ctypes.data, buf.nbytes
        fill, cons = m.unsafe_compute_mask_ptr, m.consume_token
        pc = time.perf_counter_ns
        m_ns, a_ns = [], []
        for i, tok in enumerate(tokens):
            t0 = pc()
            fill(ptr, nb)
            t1 = pc()
            m_ns.append(t1 - t0)
            if t1 > deadline_ns:
                return m_ns, a_ns, {"at": i, "why": "time"}
            ok = cons(tok)
            t2 = pc()
            if not ok:
                return m_ns, a_ns, {"at": i, "why": "rejected"}
            a_ns.append(t2 - t1)
        t0 = pc()
        fill(ptr, nb)
        m_ns.append(pc() - t0)
        return m_ns, a_ns, None


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
