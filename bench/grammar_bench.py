#!/usr/bin/env python3
"""Grammar-layer benchmark: Onyx against llguidance, outlines-core and xgrammar.

For every (vocabulary, pattern, engine) it measures
  * first mask   – compile + the first next-token mask, a fresh grammar each repetition (median);
  * eager build  – Onyx: compile + `build_all()`; outlines-core: its Index construction (eager by
                   nature); xgrammar: its compile (the work it does upfront); llguidance: n/a (lazy);
  * step         – producing the next-token mask and advancing by one token, along a valid walk
                   (a fixed sample string tokenized greedily, longest match, into the vocabulary);
                   "cold" is the first walk on a fresh grammar, mean/p99 are the warm steady state;
  * memory       – Onyx `memory_bytes` after a full build; peers where their API tells a size.

Every peer gets a vocabulary made of the same token bytes Onyx reads from the GGUF file (special
tokens are empty, the same EOS ids). Each (vocabulary, engine) runs in its own worker process:
a call that hangs past `--task-timeout` is killed, recorded as an error, and the bench goes on.

    python bench/grammar_bench.py                 # all vocabularies, all engines (a few minutes)
    python bench/grammar_bench.py --quick --engines onyx --out /tmp/gb
    python bench/grammar_bench.py --vocab qwen2 --engines onyx,xgrammar

Results: a table on stdout, `grammar_bench.json` and `grammar_bench.png` in `--out`
(default bench/results). Targets (reported, not asserted): Onyx step <= 2 us at 152k tokens in
every state, first mask <= 5 ms, eager build >= 5x faster than outlines-core's index.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------
# The fixed inputs
# --------------------------------------------------------------------------------------------

VOCABS = {  # name -> onyx asset
    "qwen2": "qwen2-tokenizer",     # 152,064 tokens, byte-level BPE (the targets' scale)
    "smollm2": "smollm2",           # 49,152 tokens, byte-level BPE
    "gemma3": "gemma3-tokenizer",   # 262,144 tokens, SentencePiece with byte fallback
}

IPV4 = r"((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
EMAIL_PATTERN = r"[a-z0-9._]+@[a-z0-9]+\.[a-z]{2,6}"

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "email": {"type": "string", "pattern": EMAIL_PATTERN},
    },
    "required": ["name", "age", "email"],
    "additionalProperties": False,
}

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": r"[A-Z]{3}-[0-9]{4}"},
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "email": {"type": "string", "pattern": EMAIL_PATTERN},
            },
            "required": ["name", "email"],
            "additionalProperties": False,
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer"},
                    "price": {"type": "number"},
                },
                "required": ["sku", "qty", "price"],
                "additionalProperties": False,
            },
            "minItems": 1,
            "maxItems": 5,
        },
    },
    "required": ["id", "customer", "items"],
    "additionalProperties": False,
}

# (name, kind, spec, a valid sample). JSON samples are compact: every engine is configured for
# compact output (no whitespace between tokens, "," and ":" separators).
PATTERNS = [
    ("digits4", "regex", r"[0-9]{4}", "2024"),
    ("email", "regex", r"[a-z]+@[a-z]+\.com", "jane@example.com"),
    ("code", "regex", r"[A-Z]{3}-[0-9]{4}", "ABC-1234"),
    ("ipv4", "regex", IPV4, "192.168.10.254"),
    ("person", "schema", PERSON_SCHEMA,
     '{"name":"Jane Doe","age":42,"email":"jane.doe@example.com"}'),
    ("order", "schema", ORDER_SCHEMA,
     '{"id":"ABC-1234","customer":{"name":"Jane Doe","email":"jane@example.com"},'
     '"items":[{"sku":"SKU-001","qty":2,"price":9.99},{"sku":"SKU-042","qty":1,"price":120.5}]}'),
]

ENGINES = ["onyx", "outlines-core", "xgrammar", "llguidance"]
PEER_PACKAGES = {"outlines-core": "outlines_core", "xgrammar": "xgrammar", "llguidance": "llguidance"}

TARGET_STEP_US = 2.0
TARGET_FIRST_MASK_MS = 5.0
TARGET_EAGER_SPEEDUP = 5.0


def pattern_label(kind: str, spec) -> str:
    return spec if kind == "regex" else "JSON schema"


# --------------------------------------------------------------------------------------------
# Vocabulary and tokenization (shared by every engine)
# --------------------------------------------------------------------------------------------

class VocabData:
    """Token bytes as Onyx reads them; special tokens (EOS included) become b""."""

    def __init__(self, name: str):
        import onyx
        from onyx import assets

        path = assets.asset_path(VOCABS[name])
        if not path.is_file():
            raise SystemExit(f"{path} is missing: run `python -m onyx.assets fetch {VOCABS[name]}`")
        self.name = name
        self.onyx_vocab = onyx.Vocabulary.from_gguf(str(path))
        v = self.onyx_vocab
        self.size = v.size
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
        words = (self.size + 31) // 32
        keep = np.zeros(words * 32, dtype=np.uint8)
        keep[: self.size] = 1
        keep[self.eos] = 0
        self.keep = np.packbits(keep, bitorder="little").view(np.uint32)

    def greedy(self, data: bytes, allowed=None) -> list[int]:
        """Longest-match tokenization; `allowed(pos_tokens) -> set|None` filters candidates."""
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


def onyx_compile(vocab, kind, spec):
    if kind == "regex":
        return vocab.compile_regex(spec)
    return vocab.compile_json_schema(spec)


def tokenize_sample(vd: VocabData, kind, spec, sample: str) -> tuple[list[int], str]:
    """Tokens of `sample`, checked against Onyx's masks when Onyx compiles the pattern."""
    data = sample.encode()
    try:
        g = onyx_compile(vd.onyx_vocab, kind, spec)
    except Exception as e:  # noqa: BLE001 - e.g. JSON Schema support not there yet
        return vd.greedy(data), f"plain greedy (Onyx could not compile: {type(e).__name__}: {e})"
    guide = _OnyxGuide(g)
    toks = vd.greedy(data, guide)
    if not g.is_accepting(guide.state):
        raise ValueError(f"sample {sample!r} does not complete the pattern under Onyx")
    return toks, "greedy, each token checked against Onyx's mask"


# --------------------------------------------------------------------------------------------
# Timing helpers
# --------------------------------------------------------------------------------------------

def timed_reps(fn, reps: int, budget_s: float):
    """Runs fn() up to `reps` times (at least once) while the total stays under budget_s.
    fn returns a dict of named durations (seconds) and anything else; returns (lists, last)."""
    out: dict[str, list[float]] = {}
    last = None
    start = time.perf_counter()
    for i in range(reps):
        last = fn()
        for k, v in last.items():
            if isinstance(v, float):
                out.setdefault(k, []).append(v)
        if time.perf_counter() - start > budget_s and i >= 0:
            break
    return out, last


def med_ms(xs):
    return statistics.median(xs) * 1e3 if xs else None


def step_stats(walks: list[list[int]]) -> dict:
    """walks: per-walk lists of per-step ns. Mean and p99 over all steps of all walks, and the
    worst state (largest per-step median across walks)."""
    allv = np.array([x for w in walks for x in w], dtype=np.float64) / 1e3
    per_step = np.median(np.array(walks, dtype=np.float64), axis=0) / 1e3
    return {
        "mean_us": float(allv.mean()),
        "p99_us": float(np.percentile(allv, 99)),
        "median_us": float(np.median(allv)),
        "worst_state_us": float(per_step.max()),
        "per_step_median_us": [round(float(x), 3) for x in per_step],
        "samples": int(allv.size),
    }


def timer_overhead_ns() -> float:
    pc = time.perf_counter_ns
    xs = []
    for _ in range(20000):
        t0 = pc()
        t1 = pc()
        xs.append(t1 - t0)
    return float(np.median(xs))


# --------------------------------------------------------------------------------------------
# Engines. Each runs inside its own worker process.
# --------------------------------------------------------------------------------------------

class Engine:
    name = "?"
    eager_note = ""

    def __init__(self, vd: VocabData):
        self.vd = vd
        self.words = (vd.size + 31) // 32

    # compile: the upfront work; returns the compiled object
    def compile(self, kind, spec):
        raise NotImplementedError

    def first_mask(self, kind, spec) -> dict:
        raise NotImplementedError

    def eager(self, kind, spec, reps, budget) -> tuple[float | None, str]:
        return None, self.eager_note

    def walk(self, compiled, tokens, *, check=False):
        """Timed walk: list of ns per step (mask + advance; the last step is the mask of the
        final state only). With check=True, untimed, returns mask signatures and acceptance."""
        raise NotImplementedError

    def memory(self, compiled) -> tuple[int | None, str]:
        return None, "n/a"


class OnyxEngine(Engine):
    name = "onyx"
    eager_note = "compile + build_all()"

    def compile(self, kind, spec):
        return onyx_compile(self.vd.onyx_vocab, kind, spec)

    def first_mask(self, kind, spec):
        pc = time.perf_counter
        t0 = pc()
        g = self.compile(kind, spec)
        t1 = pc()
        g.token_bitmask(g.initial_state)
        t2 = pc()
        return {"compile": t1 - t0, "first_mask": t2 - t0, "obj": g}

    def eager(self, kind, spec, reps, budget):
        def one():
            t0 = time.perf_counter()
            g = self.compile(kind, spec)
            g.build_all()
            return {"eager": time.perf_counter() - t0}
        xs, _ = timed_reps(one, reps, budget)
        return med_ms(xs["eager"]), self.eager_note

    def walk(self, g, tokens, *, check=False):
        mask, adv = g.token_bitmask, g.advance
        s = g.initial_state
        if check:
            sigs = []
            for tok in tokens:
                m = mask(s)
                if not (int(m[tok // 32]) >> (tok % 32)) & 1:
                    raise ValueError(f"token {tok} not in Onyx's mask")
                sigs.append(self.vd.mask_signature(m))
                s = adv(s, tok)
            sigs.append(self.vd.mask_signature(mask(s)))
            return sigs, bool(g.is_accepting(s))
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

    def breakdown(self, g, tokens, walks: int) -> dict:
        """Warm mask-only, advance-only, mask + copy into a caller buffer, and a bare Python
        method call, to see what the per-step time is made of."""
        pc = time.perf_counter_ns
        states = [g.initial_state]
        for tok in tokens:
            states.append(g.advance(states[-1], tok))
        mask, adv, acc = g.token_bitmask, g.advance, g.is_accepting
        buf = np.empty(self.words, dtype=np.uint32)
        m_ns, a_ns, c_ns, n_ns = [], [], [], []
        for _ in range(walks):
            for i, s in enumerate(states):
                t0 = pc(); mask(s); t1 = pc()
                m_ns.append(t1 - t0)
                t0 = pc(); np.copyto(buf, mask(s)); t1 = pc()
                c_ns.append(t1 - t0)
                t0 = pc(); acc(s); t1 = pc()
                n_ns.append(t1 - t0)
                if i < len(tokens):
                    t0 = pc(); adv(s, tokens[i]); t1 = pc()
                    a_ns.append(t1 - t0)
        f = lambda xs: float(np.mean(xs) / 1e3)  # noqa: E731
        return {"mask_only_mean_us": f(m_ns), "advance_only_mean_us": f(a_ns),
                "mask_copy_mean_us": f(c_ns), "is_accepting_call_mean_us": f(n_ns)}

    def all_states(self, g, repeats: int = 5) -> dict:
        """After build_all: token_bitmask of every state (median of `repeats` calls each)."""
        pc = time.perf_counter_ns
        mask = g.token_bitmask
        per, skipped = [], 0
        for s in range(g.num_states):
            try:
                mask(s)
            except Exception:  # noqa: BLE001 - a state without a mask (e.g. dead)
                skipped += 1
                continue
            xs = []
            for _ in range(repeats):
                t0 = pc(); mask(s); t1 = pc()
                xs.append(t1 - t0)
            per.append(statistics.median(xs))
        if not per:
            return {"states": 0, "skipped": skipped}
        arr = np.array(per) / 1e3
        return {"states": len(per), "skipped": skipped, "mean_us": float(arr.mean()),
                "max_us": float(arr.max())}

    def memory(self, g):
        g.build_all()
        return int(g.memory_bytes), "memory_bytes after build_all"


class OutlinesEngine(Engine):
    name = "outlines-core"
    eager_note = "Index construction (eager by nature)"

    def __init__(self, vd):
        super().__init__(vd)
        import outlines_core as oc

        self.oc = oc
        m = {b: ids for b, ids in vd.by_bytes.items()}
        self.vocab = oc.Vocabulary(vd.eos[0], m)

    def regex_of(self, kind, spec):
        if kind == "regex":
            return spec
        return self.oc.json_schema.build_regex_from_schema(json.dumps(spec), whitespace_pattern="")

    def compile(self, kind, spec):
        return self.oc.Index(self.regex_of(kind, spec), self.vocab)

    def first_mask(self, kind, spec):
        pc = time.perf_counter
        buf = np.zeros(self.words, dtype=np.int32)
        t0 = pc()
        idx = self.compile(kind, spec)
        t1 = pc()
        guide = self.oc.Guide(idx)
        guide.write_mask_into(buf.ctypes.data, self.words, 4)
        t2 = pc()
        return {"compile": t1 - t0, "first_mask": t2 - t0, "obj": idx}

    def walk(self, idx, tokens, *, check=False):
        guide = self.oc.Guide(idx)
        buf = np.zeros(self.words, dtype=np.int32)
        ptr, n = buf.ctypes.data, self.words
        write, adv = guide.write_mask_into, guide.advance
        if check:
            sigs = []
            for tok in tokens:
                write(ptr, n, 4)
                sigs.append(self.vd.mask_signature(buf))
                adv(tok, return_tokens=False)
            write(ptr, n, 4)
            sigs.append(self.vd.mask_signature(buf))
            return sigs, bool(guide.is_finished())
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


def _import_xgrammar():
    """xgrammar imports torch at module level but only uses it for tensor helpers; masks are
    filled through DLPack, which numpy arrays support. PyPI's torch for Linux pulls in several GB
    of CUDA wheels, so when torch is absent a stand-in module is put in its place (in this worker
    process only)."""
    import importlib.machinery
    import importlib.util
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


class XGrammarEngine(Engine):
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
        return self.compiler.compile_json_schema(json.dumps(spec), any_whitespace=False,
                                                 separators=(",", ":"), strict_mode=True)

    def first_mask(self, kind, spec):
        pc = time.perf_counter
        buf = np.zeros((1, self.words), dtype=np.int32)
        t0 = pc()
        cg = self.compile(kind, spec)
        t1 = pc()
        m = self.xgr.GrammarMatcher(cg)
        m.fill_next_token_bitmask(buf)
        t2 = pc()
        return {"compile": t1 - t0, "first_mask": t2 - t0, "obj": cg}

    def eager(self, kind, spec, reps, budget):
        def one():
            t0 = time.perf_counter()
            self.compile(kind, spec)
            return {"eager": time.perf_counter() - t0}
        xs, _ = timed_reps(one, reps, budget)
        return med_ms(xs["eager"]), self.eager_note

    def walk(self, cg, tokens, *, check=False):
        m = self.xgr.GrammarMatcher(cg)
        buf = np.zeros((1, self.words), dtype=np.int32)
        fill, acc = m.fill_next_token_bitmask, m.accept_token
        if check:
            sigs = []
            for tok in tokens:
                fill(buf)
                sigs.append(self.vd.mask_signature(buf[0]))
                if not acc(tok):
                    raise ValueError(f"xgrammar rejected token {tok}")
            fill(buf)
            sigs.append(self.vd.mask_signature(buf[0]))
            return sigs, bool(acc(self.vd.eos[0]))
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


class LLGuidanceEngine(Engine):
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
        return M.grammar_from_json_schema(spec, overrides={
            "whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})

    def compile(self, kind, spec):
        m = self.llg.LLMatcher(self.tok, self.grammar(kind, spec), log_level=0)
        if m.is_error():
            raise RuntimeError(f"llguidance: {m.get_error()}")
        return m

    def first_mask(self, kind, spec):
        pc = time.perf_counter
        buf = np.zeros(self.words, dtype=np.int32)
        t0 = pc()
        m = self.compile(kind, spec)
        t1 = pc()
        m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)
        t2 = pc()
        return {"compile": t1 - t0, "first_mask": t2 - t0, "obj": m}

    def walk(self, m, tokens, *, check=False):
        m.reset()
        buf = np.zeros(self.words, dtype=np.int32)
        ptr, nb = buf.ctypes.data, buf.nbytes
        fill, cons = m.unsafe_compute_mask_ptr, m.consume_token
        if check:
            sigs = []
            for tok in tokens:
                fill(ptr, nb)
                sigs.append(self.vd.mask_signature(buf))
                if not cons(tok):
                    raise ValueError(f"llguidance rejected token {tok}: {m.get_error()}")
            fill(ptr, nb)
            sigs.append(self.vd.mask_signature(buf))
            return sigs, bool(m.is_accepting())
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


ENGINE_CLASSES = {"onyx": OnyxEngine, "outlines-core": OutlinesEngine,
                  "xgrammar": XGrammarEngine, "llguidance": LLGuidanceEngine}


# --------------------------------------------------------------------------------------------
# One row, inside a worker
# --------------------------------------------------------------------------------------------

def run_row(eng: Engine, task: dict) -> dict:
    kind, spec, tokens, reps = task["kind"], task["spec"], task["tokens"], task["reps"]
    row: dict = {"errors": []}

    # first mask (compile + first mask, fresh grammar each time)
    fm, last = timed_reps(lambda: eng.first_mask(kind, spec), reps["first"], reps["budget_s"])
    row["first_mask_ms"] = med_ms(fm["first_mask"])
    row["compile_ms"] = med_ms(fm["compile"])
    row["first_mask_reps"] = len(fm["first_mask"])
    compiled = last["obj"]

    # eager build
    if isinstance(eng, OutlinesEngine):
        row["eager_build_ms"], row["eager_note"] = row["compile_ms"], eng.eager_note
    else:
        row["eager_build_ms"], row["eager_note"] = eng.eager(kind, spec, reps["eager"], reps["budget_s"])

    # check walk: every token allowed, masks' signatures, acceptance
    try:
        fresh = eng.compile(kind, spec) if not isinstance(eng, OutlinesEngine) else compiled
        sigs, accepted = eng.walk(fresh, tokens, check=True)
        row["mask_signatures"] = [list(s[:3]) for s in sigs]
        row["_masks"] = [s[3] for s in sigs]  # compared with Onyx's by the parent, not saved
        row["accepted"] = accepted
        if not accepted:
            row["errors"].append("walk did not end in an accepting state")
    except Exception as e:  # noqa: BLE001
        row["errors"].append(f"check walk: {type(e).__name__}: {e}")

    # cold walk: first walk on a freshly compiled grammar
    cold_obj = eng.compile(kind, spec) if not isinstance(eng, OutlinesEngine) else compiled
    cold = eng.walk(cold_obj, tokens)
    row["cold_step_mean_us"] = float(np.mean(cold) / 1e3)
    row["cold_step_max_us"] = float(np.max(cold) / 1e3)

    # warm walks: one warm-up walk, then timed walks (enough for min_samples steps)
    eng.walk(cold_obj, tokens)
    walks = []
    start = time.perf_counter()
    n_walks = max(reps["walks"], -(-reps["min_samples"] // (len(tokens) + 1)))
    for _ in range(n_walks):
        walks.append(eng.walk(cold_obj, tokens))
        if time.perf_counter() - start > reps["budget_s"]:
            break
    st = step_stats(walks)
    row["step_mean_us"], row["step_p99_us"] = st["mean_us"], st["p99_us"]
    row["step_median_us"], row["step_worst_state_us"] = st["median_us"], st["worst_state_us"]
    row["step_per_step_median_us"] = st["per_step_median_us"]
    row["step_walks"] = len(walks)
    row["n_steps"] = len(tokens) + 1

    if isinstance(eng, OnyxEngine):
        row["onyx_breakdown"] = eng.breakdown(cold_obj, tokens, max(3, reps["walks"] // 2))
    mem, note = eng.memory(cold_obj)
    row["memory_bytes"], row["memory_note"] = mem, note
    if isinstance(eng, OnyxEngine):
        row["num_states"] = int(cold_obj.num_states)
        row["all_states"] = eng.all_states(cold_obj)
    return row


def worker_main(conn, engine: str, vocab_name: str):
    try:
        t0 = time.perf_counter()
        vd = VocabData(vocab_name)
        t1 = time.perf_counter()
        eng = ENGINE_CLASSES[engine](vd)
        t2 = time.perf_counter()
        info = {"vocab_load_ms": (t1 - t0) * 1e3, "engine_setup_ms": (t2 - t1) * 1e3}
        if engine == "xgrammar":
            info["torch_stub"] = eng.torch_stub
        # Warm-up compile: one-time per-vocabulary work is not charged to the first row.
        t3 = time.perf_counter()
        try:
            obj = eng.first_mask("regex", r"[a-z]{2}")
            del obj
        except Exception:  # noqa: BLE001
            pass
        info["warmup_compile_ms"] = (time.perf_counter() - t3) * 1e3
        conn.send(("ready", info))
    except Exception as e:  # noqa: BLE001
        conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    while True:
        task = conn.recv()
        if task is None:
            return
        try:
            conn.send(("ok", run_row(eng, task)))
        except Exception as e:  # noqa: BLE001
            conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))


class Worker:
    def __init__(self, engine, vocab_name, timeout):
        ctx = mp.get_context("spawn")
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, engine, vocab_name), daemon=True)
        self.proc.start()
        child.close()
        self.info = None
        self.error = None
        msg = self._recv(timeout)
        if msg is None:
            self.error = f"engine setup timed out after {timeout:.0f} s"
        elif msg[0] == "ready":
            self.info = msg[1]
        else:
            self.error = f"engine setup failed: {msg[1]}"
        if self.error:
            self.close()

    def _recv(self, timeout):
        try:
            if self.parent.poll(timeout):
                return self.parent.recv()
        except (EOFError, OSError):
            return ("error", f"worker died (exit code {self.proc.exitcode})", "")
        return None

    def run(self, task, timeout):
        self.parent.send(task)
        msg = self._recv(timeout)
        if msg is None:
            self.close()
            return None, f"timed out after {timeout:.0f} s (worker killed)"
        if msg[0] == "ok":
            return msg[1], None
        return None, msg[1]

    def alive(self):
        return self.proc.is_alive()

    def close(self):
        if self.proc.is_alive():
            try:
                self.parent.send(None)
                self.proc.join(2)
            except (BrokenPipeError, OSError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def peer_available(engine: str) -> str | None:
    import importlib.util

    if engine == "onyx":
        return None
    pkg = PEER_PACKAGES[engine]
    if importlib.util.find_spec(pkg) is None:
        return f"{pkg} is not installed (pip install {engine})"
    return None


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ["onyx", "llguidance", "outlines-core", "xgrammar", "numpy", "torch"]:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def _ids(words: np.ndarray, limit: int = 4) -> list[int]:
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))[:limit].tolist()


def compare_masks(rows: list[dict], token_bytes: dict[str, list[bytes]]):
    """Marks each peer row with the steps where its mask (EOS bits aside) differs from Onyx's
    along the same walk: whether it allows a subset or a superset, and a few token examples."""
    by_key = {(r["vocab"], r["pattern"]): r for r in rows if r["engine"] == "onyx"}
    for r in rows:
        o = by_key.get((r["vocab"], r["pattern"]))
        if r["engine"] == "onyx" or not o or "_masks" not in r or "_masks" not in o:
            continue
        toks = token_bytes[r["vocab"]]
        diffs = []
        for i, (a, b) in enumerate(zip(r["_masks"], o["_masks"])):
            if a == b:
                continue
            pa, po = np.frombuffer(a, dtype=np.uint32), np.frombuffer(b, dtype=np.uint32)
            extra, missing = _ids(pa & ~po), _ids(po & ~pa)
            diffs.append({"step": i, "peer_allowed": r["mask_signatures"][i][0],
                          "onyx_allowed": o["mask_signatures"][i][0],
                          "only_peer": [[t, toks[t].decode("utf-8", "replace")] for t in extra],
                          "only_onyx": [[t, toks[t].decode("utf-8", "replace")] for t in missing]})
        kinds = {("subset" if not d["only_peer"] else "superset" if not d["only_onyx"] else "different")
                 for d in diffs}
        r["mask_diff_vs_onyx"] = {"steps_differing": len(diffs), "steps": len(o["_masks"]),
                                  "relation": "/".join(sorted(kinds)) or "equal", "examples": diffs[:5]}
    for r in rows:
        r.pop("_masks", None)


def add_ratios(rows):
    by_key = {(r["vocab"], r["pattern"]): r for r in rows if r["engine"] == "onyx"}
    for r in rows:
        o = by_key.get((r["vocab"], r["pattern"]))
        rat = {}
        for key, col in (("first_mask", "first_mask_ms"), ("eager_build", "eager_build_ms"),
                         ("step", "step_mean_us")):
            a, b = r.get(col), (o or {}).get(col)
            rat[key] = (a / b) if (a and b) else None
        r["ratio_vs_onyx"] = rat


def evaluate_targets(rows) -> list[dict]:
    out = []
    outl = {(r["vocab"], r["pattern"]): r for r in rows if r["engine"] == "outlines-core"}
    for r in rows:
        if r["engine"] != "onyx":
            continue
        t = {"vocab": r["vocab"], "vocab_size": r["vocab_size"], "pattern": r["pattern"]}
        if r.get("error"):
            t["error"] = r["error"]
            out.append(t)
            continue
        worst = max(x for x in [r.get("step_worst_state_us"), (r.get("all_states") or {}).get("max_us")]
                    if x is not None)
        t["step"] = {"worst_us": worst, "pass": worst <= TARGET_STEP_US,
                     "applies": r["vocab_size"] >= 150_000}
        t["first_mask"] = {"ms": r["first_mask_ms"], "pass": r["first_mask_ms"] <= TARGET_FIRST_MASK_MS}
        p = outl.get((r["vocab"], r["pattern"]))
        if p and p.get("eager_build_ms") and r.get("eager_build_ms"):
            sp = p["eager_build_ms"] / r["eager_build_ms"]
            t["eager_vs_outlines"] = {"speedup": sp, "pass": sp >= TARGET_EAGER_SPEEDUP}
        else:
            t["eager_vs_outlines"] = {"speedup": None, "pass": None,
                                      "why": (p or {}).get("error") or "no outlines-core row"}
        out.append(t)
    return out


def fmt(x, unit="", digits=None):
    if x is None:
        return "n/a"
    if isinstance(x, (int, float)) and math.isfinite(x):
        if digits is None:
            digits = 2 if abs(x) < 10 else (1 if abs(x) < 1000 else 0)
        return f"{x:,.{digits}f}{unit}"
    return str(x)


def fmt_mem(b):
    if b is None:
        return "n/a"
    if b < 1 << 20:
        return f"{b / 1024:.1f} KiB"
    return f"{b / (1 << 20):.1f} MiB"


def print_table(rows, targets):
    cols = ["vocab", "pattern", "engine", "first ms", "eager ms", "cold µs", "step µs", "p99 µs",
            "memory", "first×", "eager×", "step×", "note"]
    lines = []
    for r in rows:
        rat = r.get("ratio_vs_onyx") or {}
        note = r.get("error") or ""
        if not note:
            parts = []
            if r["engine"] != "onyx" and r.get("eager_note") and r["engine"] != "outlines-core":
                parts.append(r["eager_note"])
            if r.get("errors"):
                parts.extend(r["errors"])
            d = r.get("mask_diff_vs_onyx")
            if d and d["steps_differing"]:
                parts.append(f"mask is a {d['relation']} of Onyx's at {d['steps_differing']}/{d['steps']} steps")
            if r["engine"] == "onyx" and r.get("tokenization", "").startswith("plain"):
                parts.append("tokens not checked by Onyx")
            note = "; ".join(parts)
        lines.append([
            r["vocab"], r["pattern"], r["engine"], fmt(r.get("first_mask_ms")),
            fmt(r.get("eager_build_ms")), fmt(r.get("cold_step_mean_us")), fmt(r.get("step_mean_us")),
            fmt(r.get("step_p99_us")), fmt_mem(r.get("memory_bytes")),
            "" if r["engine"] == "onyx" else fmt(rat.get("first_mask"), "×", 1),
            "" if r["engine"] == "onyx" else fmt(rat.get("eager_build"), "×", 1),
            "" if r["engine"] == "onyx" else fmt(rat.get("step"), "×", 1),
            note[:90],
        ])
    widths = [max(len(c), *(len(l[i]) for l in lines)) if lines else len(c) for i, c in enumerate(cols)]
    right = set(range(3, 12))

    def line(vals):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    print(line(cols))
    print("  ".join("-" * w for w in widths))
    prev = None
    for l in lines:
        if prev and (l[0], l[1]) != prev:
            print()
        prev = (l[0], l[1])
        print(line(l))
    print("\nratios are peer / Onyx (above 1: Onyx is faster). step = next-token mask + advance, "
          "warm; cold = first walk on a fresh grammar.")

    print(f"\nTargets (Onyx): step <= {TARGET_STEP_US} µs in every state at 152k tokens (worst of "
          f"per-step medians along the walk and of every state's mask after build_all); first mask "
          f"<= {TARGET_FIRST_MASK_MS} ms; eager build >= {TARGET_EAGER_SPEEDUP}× faster than outlines-core")
    pf = lambda ok: "n/a " if ok is None else ("PASS" if ok else "FAIL")  # noqa: E731
    for t in targets:
        label = f"  {t['vocab']:8} {t['pattern']:8}"
        if "error" in t:
            print(f"{label} ERROR {t['error'][:100]}")
            continue
        s, f, e = t["step"], t["first_mask"], t["eager_vs_outlines"]
        step_txt = f"step {pf(s['pass'])} ({fmt(s['worst_us'])} µs)" + ("" if s["applies"] else " [info: target is at 152k]")
        eag = f"eager×outlines {pf(e['pass'])} ({fmt(e['speedup'], '×', 1)})" if e["speedup"] else f"eager×outlines n/a ({str(e.get('why'))[:40]})"
        print(f"{label} {step_txt:44} first mask {pf(f['pass'])} ({fmt(f['ms'])} ms)   {eag}")
    at152 = [t for t in targets if t.get("vocab_size", 0) >= 150_000]
    if at152:
        done = [t for t in at152 if "error" not in t]
        failed = [t for t in done if not (t["step"]["pass"] and t["first_mask"]["pass"])
                  or t["eager_vs_outlines"]["pass"] is False]
        missing = [t for t in at152 if "error" in t or t["eager_vs_outlines"]["pass"] is None]
        verdict = "FAIL" if failed else ("INCOMPLETE" if missing else "PASS")
        print(f"  targets at >=152k tokens: {verdict}: {len(done) - len(failed)}/{len(at152)} patterns pass"
              + (f", {len(failed)} fail" if failed else "")
              + (f", {len(missing)} without a result (Onyx or outlines-core row missing)" if missing else ""))


def plot(rows, path: Path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    vocabs = [v for v in VOCABS if any(r["vocab"] == v for r in rows)]
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    pats = [p[0] for p in PATTERNS if any(r["pattern"] == p[0] for r in rows)]
    colors = {"onyx": "#1b9e77", "outlines-core": "#d95f02", "xgrammar": "#7570b3", "llguidance": "#e7298a"}
    fig, axes = plt.subplots(len(vocabs), 2, figsize=(14, 4.2 * len(vocabs)), squeeze=False)
    bw = 0.8 / max(1, len(engines))
    for vi, v in enumerate(vocabs):
        size = next(r["vocab_size"] for r in rows if r["vocab"] == v)
        for ci, (col, title) in enumerate((("step_mean_us", "step mean (µs): mask + advance, warm"),
                                           ("eager_build_ms", "eager build (ms)"))):
            ax = axes[vi][ci]
            for ei, e in enumerate(engines):
                xs, ys = [], []
                for pi, p in enumerate(pats):
                    r = next((r for r in rows if r["vocab"] == v and r["engine"] == e and r["pattern"] == p), None)
                    val = r.get(col) if r else None
                    x = pi + (ei - (len(engines) - 1) / 2) * bw
                    if val:
                        xs.append(x)
                        ys.append(val)
                    else:
                        ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7,
                                transform=ax.get_xaxis_transform())
                ax.bar(xs, ys, width=bw, label=e, color=colors.get(e))
            ax.set_yscale("log")
            ax.set_xticks(range(len(pats)))
            ax.set_xticklabels(pats)
            ax.set_title(f"{v} ({size:,} tokens): {title}")
            ax.grid(axis="y", which="both", alpha=0.3)
            if col == "step_mean_us":
                ax.axhline(TARGET_STEP_US, color="k", ls="--", lw=0.8)
            if vi == 0 and ci == 0:
                ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one vocabulary (qwen2 unless --vocab), fewer repetitions")
    ap.add_argument("--vocab", default=None, help=f"comma-separated subset of {','.join(VOCABS)}")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)}")
    ap.add_argument("--patterns", default=None, help=f"comma-separated subset of {','.join(p[0] for p in PATTERNS)}")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory")
    ap.add_argument("--task-timeout", type=float, default=180.0, help="seconds one row may take before its worker is killed")
    ap.add_argument("--budget", type=float, default=570.0, help="seconds for the whole bench; rows past it are skipped")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)

    vocabs = args.vocab.split(",") if args.vocab else (["qwen2"] if args.quick else list(VOCABS))
    engines = args.engines.split(",")
    pats = [p for p in PATTERNS if not args.patterns or p[0] in args.patterns.split(",")]
    for v in vocabs:
        if v not in VOCABS:
            ap.error(f"unknown vocabulary {v!r}; known: {', '.join(VOCABS)}")
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; known: {', '.join(ENGINES)}")
    reps = ({"first": 3, "eager": 3, "walks": 10, "min_samples": 300, "budget_s": 1.5} if args.quick
            else {"first": 7, "eager": 5, "walks": 30, "min_samples": 3000, "budget_s": 4.0})
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    t_start = time.perf_counter()
    rows: list[dict] = []
    setup: dict = {}
    token_bytes: dict[str, list[bytes]] = {}
    overhead = timer_overhead_ns()
    load_before = os.getloadavg()
    for vname in vocabs:
        vd = VocabData(vname)
        token_bytes[vname] = vd.tokens
        samples = {}
        for name, kind, spec, sample in pats:
            try:
                toks, how = tokenize_sample(vd, kind, spec, sample)
                samples[name] = (toks, how, None)
            except Exception as e:  # noqa: BLE001
                samples[name] = (None, None, f"tokenizing the sample: {type(e).__name__}: {e}")
        for engine in engines:
            base = {"vocab": vname, "vocab_size": vd.size, "engine": engine}
            why = peer_available(engine)
            worker = None
            for name, kind, spec, sample in pats:
                row = dict(base, pattern=name, kind=kind, pattern_text=pattern_label(kind, spec),
                           sample=sample)
                toks, how, terr = samples[name]
                row["tokens"], row["tokenization"] = toks, how
                elapsed = time.perf_counter() - t_start
                if why or terr:
                    row["error"] = why or terr
                elif elapsed > args.budget:
                    row["error"] = f"skipped: bench time budget ({args.budget:.0f} s) used up"
                else:
                    if worker is None or not worker.alive():
                        worker = Worker(engine, vname, args.task_timeout)
                        if worker.info:
                            setup[f"{vname}/{engine}"] = worker.info
                    if worker.error:
                        row["error"] = worker.error
                        worker = None
                    else:
                        remaining = max(30.0, args.budget - elapsed + 60.0)
                        res, err = worker.run({"kind": kind, "spec": spec, "tokens": toks, "reps": reps},
                                              min(args.task_timeout, remaining))
                        if err:
                            row["error"] = err
                        else:
                            row.update(res)
                            row["error"] = None
                rows.append(row)
                status = row.get("error") or (f"first {fmt(row.get('first_mask_ms'))} ms, "
                                              f"step {fmt(row.get('step_mean_us'))} µs")
                print(f"[{time.perf_counter() - t_start:6.1f}s] {vname:8} {engine:13} {name:8} {status[:120]}",
                      file=sys.stderr, flush=True)
            if worker is not None:
                worker.close()

    compare_masks(rows, token_bytes)
    add_ratios(rows)
    targets = evaluate_targets(rows)
    print()
    print_table(rows, targets)

    result = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version()},
            "versions": versions(),
            "args": vars(args),
            "reps": reps,
            "timer_overhead_ns": overhead,
            "loadavg_before_after": [load_before, os.getloadavg()],
            "setup": setup,
            "total_s": time.perf_counter() - t_start,
            "notes": [
                "step = next-token mask + advance (the final state: mask only), timed per step with "
                "perf_counter_ns on warm state; timer overhead is not subtracted",
                "Onyx token_bitmask hands out a precomputed read-only view (no copy); peers fill a "
                "caller buffer. onyx_breakdown.mask_copy_mean_us adds a copy into a buffer",
                "xgrammar: GrammarCompiler(cache_enabled=False); masks via fill_next_token_bitmask "
                "into an int32 numpy array (DLPack). When torch is not installed a stand-in module "
                "replaces it inside the xgrammar worker only",
                "llguidance: LLMatcher.unsafe_compute_mask_ptr + consume_token; no eager build",
                "outlines-core: Guide.write_mask_into + advance(return_tokens=False); memory is the "
                "pickled Index size",
                "JSON schemas: compact output for every engine (no whitespace, ',' and ':')",
            ],
        },
        "targets": targets,
        "rows": rows,
    }
    json_path = out_dir / "grammar_bench.json"
    json_path.write_text(json.dumps(result, indent=1, default=str))
    print(f"\nJSON: {json_path}")
    if not args.no_plot:
        p = plot(rows, out_dir / "grammar_bench.png")
        if p:
            print(f"plot: {p}")
    print(f"total {time.perf_counter() - t_start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
