"""The engines behind bench.peers' interface: `Adapter` (the interface, documented in
`bench.peers`) and one subclass each for Onyx, outlines-core, xgrammar and llguidance."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import TYPE_CHECKING

import numpy as np

from bench.corpus import GBNF_ASSET

if TYPE_CHECKING:
    from bench.peers import VocabData


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
