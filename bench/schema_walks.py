"""Random walks through a compiled JSON Schema grammar, and the judge of the texts they write.

Shared by `bench/schema_bench.py` (validity over JSONSchemaBench) and
`tests/grammar/test_schema_validity.py`. The claim under test is the JSON Schema compiler's: every text
the grammar accepts parses as JSON and validates against the schema with Python `jsonschema`,
format checking on. A walk starts at the grammar's initial state and picks, at each step, one
of the allowed tokens uniformly at random (EOS aside); in an accepting state it stops with
probability `p_stop`. Uniform choice over a 49k-token vocabulary writes long, odd strings and
many-byte tokens: the texts a model would rarely write, which is what a soundness check wants.

- `onyx_walk` keeps every walk within a token budget with the grammar's budget-aware mask
  (`token_bitmask_within`): a token is allowed only if acceptance stays reachable in the tokens
  left, so every walk ends accepting.
- `matcher_walk` walks any `bench.peers.Matcher` (a peer library's), which has no such mask:
  past the budget it closes the text greedily (in a string a `"`, elsewhere `}` or `]` first,
  else any one-byte token) and gives up, unfinished, after a hard cap.

`Judge` picks the validator the way the compiler reads the schema (see `judge_class`), then
checks a text: strict JSON (no duplicate keys, no NaN/Infinity), then the schema.

`SchemaWorker` runs `compile_call` and `walk_call` inside a `harness.Worker` holding a
`bench.peers` adapter, so a compile or walk that hangs is killed at its timeout.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import numpy as np
from jsonschema import validators

from bench import harness, peers
from bench.corpus import JSONSCHEMABENCH_DIR
from onyx.errors import GrammarError

# --------------------------------------------------------------------------------------------
# The schema sets
# --------------------------------------------------------------------------------------------


def load_set(name: str, data_dir: Path = JSONSCHEMABENCH_DIR, limit: int | None = None) -> list[tuple[str, object]]:
    """(file name, schema) of a JSONSchemaBench set, in file order; the first `limit` only."""
    out = []
    with gzip.open(Path(data_dir) / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(out) >= limit:
                break
            case = json.loads(line)
            out.append((case["file"], case["schema"]))
    return out


def sample_by_hash(cases: list[tuple[str, object]], n: int, salt: str = "") -> list[tuple[str, object]]:
    """A deterministic sample of `n` cases: the ones whose file name hashes lowest (stable
    across runs and machines, independent of the file's order)."""
    key = lambda c: hashlib.sha256((salt + c[0]).encode()).hexdigest()  # noqa: E731
    return sorted(cases, key=key)[:n]


def error_class(e: BaseException) -> str:
    """A short class for a compile error, to count refusals by. Onyx's errors are typed: the
    class, with the keyword of an unsupported one and the part of a too-large one
    (`UnsupportedSchemaError[pattern]`, `GrammarTooLargeError[DFA]`). A peer's: the class and
    the start of the message with names and numbers blanked."""
    name = type(e).__name__
    msg = str(e)
    keyword = getattr(e, "keyword", None)
    if keyword:
        return f"{name}[{keyword}]"
    if name == "GrammarTooLargeError":
        return f"{name}[{msg.split(' exceeds', 1)[0][:40]}]"
    if isinstance(e, GrammarError):
        return name
    msg = re.sub(r'"[^"]*"|\'[^\']*\'|`[^`]*`', "…", msg)
    msg = re.sub(r"\d+", "N", msg.splitlines()[0] if msg else "")
    return f"{name}: {msg[:70]}"


# --------------------------------------------------------------------------------------------
# Judging a text
# --------------------------------------------------------------------------------------------

# Newest first; the marker is what a `$schema` URI contains (as the compiler's policy.rs reads it).
DRAFTS: list[tuple[str, type]] = [
    ("2020-12", validators.Draft202012Validator),
    ("2019-09", validators.Draft201909Validator),
    ("draft-07", validators.Draft7Validator),
    ("draft-06", validators.Draft6Validator),
    ("draft-04", validators.Draft4Validator),
    ("draft-03", validators.Draft3Validator),
]
DRAFT_NAMES = {cls: marker for marker, cls in DRAFTS}


def declared_draft(schema) -> type | None:
    """The validator class of the draft the schema's `$schema` names, or None."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return None
    for marker, cls in DRAFTS:
        if marker in uri:
            return cls
    return None


def metaschema_drafts(schema) -> list[type]:
    """The validator classes (newest first) whose metaschema accepts the schema."""
    out = []
    for _marker, cls in DRAFTS:
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError:
            continue
        except Exception:  # noqa: BLE001 - a metaschema check that crashes does not accept it
            continue
        out.append(cls)
    return out


# DRAFTS' markers, oldest first.
DRAFT_ORDER = [marker for marker, _ in reversed(DRAFTS)]
# Keywords newer than draft 4, by the draft that introduced them.
INTRODUCED_IN = {
    **dict.fromkeys(["const", "contains", "propertyNames"], "draft-06"),
    **dict.fromkeys(["if", "then", "else"], "draft-07"),
    **dict.fromkeys(["$defs", "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                     "minContains", "maxContains", "$anchor", "$recursiveRef"], "2019-09"),
    **dict.fromkeys(["prefixItems", "$dynamicRef", "$dynamicAnchor"], "2020-12"),
}
SUBSCHEMA_MAPS = ["properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"]
SUBSCHEMA_ONES = ["not", "if", "then", "else", "items", "additionalItems", "contains", "unevaluatedItems",
                  "additionalProperties", "propertyNames", "unevaluatedProperties"]
SUBSCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "items", "prefixItems"]


def oldest_draft_for(schema) -> str:
    """The oldest draft (a DRAFTS marker) defining every keyword the schema uses in schema
    positions; "draft-04" when it uses none newer. The compiler reads a schema without
    `$schema` as written for that draft and later (grammar_engine's json_schema/policy.rs)."""
    oldest, stack, seen = "draft-04", [schema], 0
    while stack and seen < 200_000:
        node = stack.pop()
        seen += 1
        if not isinstance(node, dict):
            continue
        for k in node:
            d = INTRODUCED_IN.get(k)
            if d and DRAFT_ORDER.index(d) > DRAFT_ORDER.index(oldest):
                oldest = d
        for k in SUBSCHEMA_MAPS:
            if isinstance(node.get(k), dict):
                stack.extend(node[k].values())
        stack.extend(node[k] for k in SUBSCHEMA_ONES if isinstance(node.get(k), dict))
        for k in SUBSCHEMA_LISTS:
            if isinstance(node.get(k), list):
                stack.extend(node[k])
    return oldest


def judge_class(schema) -> tuple[type, str, list[type]]:
    """(validator class, how it was chosen, other drafts whose metaschema accepts the schema).

    The draft `$schema` names, if any. Otherwise the newest draft whose metaschema accepts the
    schema (2020-12 first), else 2020-12 anyway. A schema without `$schema` is compiled so that
    its output validates under the reading of every draft from the oldest that defines all its
    keywords (grammar_engine's json_schema/policy.rs), so the other accepting drafts from that
    one on (draft 3 aside: the compiler reads drafts 4 to 2020-12) are a further check, reported
    on its own."""
    cls = declared_draft(schema)
    if cls is not None:
        return cls, "$schema", []
    accepting = metaschema_drafts(schema)
    if not accepting:
        return validators.Draft202012Validator, "no metaschema accepts it: 2020-12", []
    since = DRAFT_ORDER.index(oldest_draft_for(schema))
    others = [c for c in accepting[1:]
              if c is not validators.Draft3Validator and DRAFT_ORDER.index(DRAFT_NAMES[c]) >= since]
    return accepting[0], "newest metaschema that accepts it", others


class JsonError(ValueError):
    """The text is not strict JSON."""


def _no_duplicates(pairs):
    seen = set()
    for k, _ in pairs:
        if k in seen:
            raise JsonError(f"duplicate key {k!r}")
        seen.add(k)
    return dict(pairs)


def _no_constant(name):
    raise JsonError(f"{name} is not JSON")


def parse_strict(data: bytes):
    """The JSON value of `data`: UTF-8, one value, no duplicate keys, no NaN/Infinity."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonError(f"not UTF-8: {e}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise JsonError(f"not JSON: {e}") from None


@dataclass
class Verdict:
    """`status`: "valid", "invalid" (the text is wrong: `error` says why) or "unjudged" (the
    validator itself failed, e.g. an unresolvable remote `$ref`)."""

    status: str
    error: str | None = None


class Judge:
    """Validates texts against one schema, format checking on (each draft's own format checker:
    `jsonschema.FormatChecker()` without arguments would apply draft 3's `time` and `color` to
    every draft)."""

    def __init__(self, schema):
        self.schema = schema
        self.cls, self.how, self.other_classes = judge_class(schema)
        self.draft = DRAFT_NAMES[self.cls]
        self.validator = self.cls(schema, format_checker=self.cls.FORMAT_CHECKER)
        self.others = [c(schema, format_checker=c.FORMAT_CHECKER) for c in self.other_classes]

    @staticmethod
    def _validate(validator, value) -> Verdict:
        try:
            err = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except Exception as e:  # noqa: BLE001 - the validator failed, not the text
            return Verdict("unjudged", f"{type(e).__name__}: {e}"[:300])
        if err is None:
            return Verdict("valid")
        where = "/".join(str(p) for p in err.absolute_path)
        rule = json.dumps(err.validator_value, ensure_ascii=False)
        rule = rule if len(rule) <= 120 else rule[:117] + "..."
        msg = err.message if len(err.message) <= 200 else err.message[:80] + " ... " + err.message[-115:]
        return Verdict("invalid", f"at /{where}: {err.validator} {rule}: {msg}")

    def check(self, data: bytes) -> Verdict:
        try:
            value = parse_strict(data)
        except JsonError as e:
            return Verdict("invalid", str(e)[:300])
        return self._validate(self.validator, value)

    def check_other_drafts(self, data: bytes) -> list[tuple[str, Verdict]]:
        """(draft, verdict) under every other draft whose metaschema accepts a schema without
        `$schema`; empty for a text that is not JSON (`check` reports it)."""
        try:
            value = parse_strict(data)
        except JsonError:
            return []
        return [(DRAFT_NAMES[type(v)], self._validate(v, value)) for v in self.others]


# --------------------------------------------------------------------------------------------
# Walks
# --------------------------------------------------------------------------------------------


class WalkVocab:
    """What a walk needs of a vocabulary: token bytes (b"" for special tokens), the EOS ids,
    and the closing tokens `matcher_walk` prefers once past its budget."""

    def __init__(self, token_bytes: list[bytes], eos_ids):
        self.tokens = list(token_bytes)
        self.size = len(self.tokens)
        self.eos = sorted(set(int(e) for e in eos_ids))
        self.not_eos = np.ones(self.size, dtype=bool)
        self.not_eos[self.eos] = False
        ids = lambda pred: np.array([i for i, b in enumerate(self.tokens) if pred(b)], dtype=np.int64)  # noqa: E731
        quote, brackets, byte = ids(lambda b: b == b'"'), ids(lambda b: b in (b"}", b"]")), ids(lambda b: len(b) == 1)
        # Inside a string a quote closes it; outside, a bracket closes the innermost container.
        self.closers = {True: [quote, byte], False: [brackets, quote, byte]}


@dataclass
class Walk:
    tokens: list[int] = field(default_factory=list)
    text: bytes = b""
    finished: bool = False  # ended in an accepting state


def allowed_ids(mask, vocab: WalkVocab) -> np.ndarray:
    """The token ids a uint32 bitmask allows, EOS excluded."""
    bits = np.unpackbits(np.asarray(mask).view(np.uint8), bitorder="little")[: vocab.size].astype(bool)
    return np.flatnonzero(bits & vocab.not_eos)


def onyx_walk(grammar, vocab: WalkVocab, rng: random.Random, budget: int = 96, p_stop: float = 0.25) -> Walk:
    """One random walk through an Onyx grammar that ends accepting within `budget` tokens (or
    within the fewest tokens the grammar needs, when that is more)."""
    state = grammar.initial_state
    walk = Walk()
    left = budget
    while True:
        accepting = bool(grammar.is_accepting(state))
        ids = allowed_ids(grammar.token_bitmask_within(state, left - 1), vocab) if left > 0 else np.empty(0, int)
        if not walk.tokens and not accepting and ids.size == 0:
            # The grammar needs more tokens than the budget: allow exactly what it needs.
            need = int(grammar.min_tokens_to_accept(state))
            if need <= left:
                raise RuntimeError(f"no token allowed at the start with {left} tokens to go (needs {need})")
            left = need
            continue
        if accepting and (ids.size == 0 or rng.random() < p_stop):
            walk.finished = True
            break
        if ids.size == 0:
            raise RuntimeError(f"walk stuck in state {state} after {len(walk.tokens)} tokens "
                               "(not accepting, no token allowed)")
        tok = int(ids[rng.randrange(ids.size)])
        state = grammar.advance(state, tok)
        walk.tokens.append(tok)
        left -= 1
    walk.text = b"".join(vocab.tokens[t] for t in walk.tokens)
    return walk


def _scan(data: bytes, in_string: bool, escaped: bool) -> tuple[bool, bool]:
    """Whether JSON text is inside a string (and just after a backslash there) after `data`."""
    for b in data:
        if escaped:
            escaped = False
        elif in_string and b == 0x5C:
            escaped = True
        elif b == 0x22:
            in_string = not in_string
    return in_string, escaped


def matcher_walk(matcher, vocab: WalkVocab, rng: random.Random, budget: int = 96, p_stop: float = 0.25,
                 cap: int = 400) -> Walk:
    """One random walk through a peer's `Matcher`: uniform for `budget` tokens, then closing
    (the first non-empty group of `vocab.closers` the mask allows), giving up after `cap`."""
    walk = Walk()
    in_string, escaped = False, False
    while len(walk.tokens) < cap:
        accepting = bool(matcher.is_accepting())
        mask = np.asarray(matcher.mask()).view(np.uint32)
        ids = allowed_ids(mask, vocab)
        if accepting and (ids.size == 0 or rng.random() < p_stop or len(walk.tokens) >= budget):
            walk.finished = True
            break
        if ids.size == 0:
            break
        if len(walk.tokens) >= budget:
            allowed = np.zeros(vocab.size, dtype=bool)
            allowed[ids] = True
            for group in vocab.closers[in_string]:
                hit = group[allowed[group]] if group.size else group
                if hit.size:
                    ids = hit
                    break
        tok = int(ids[rng.randrange(ids.size)])
        matcher.advance(tok)
        walk.tokens.append(tok)
        in_string, escaped = _scan(vocab.tokens[tok], in_string, escaped)
    walk.text = b"".join(vocab.tokens[t] for t in walk.tokens)
    return walk


def check_walks(walk_fn, judge: Judge, n: int, seed: int, keep: int = 2) -> dict:
    """Runs `walk_fn(rng)` n times (rng seeded from `seed`) and judges each finished walk.
    Counts by verdict, walks that did not finish or raised, other-draft failures, and the first
    `keep` failing texts."""
    out = {"walks": n, "valid": 0, "invalid": 0, "unjudged": 0, "unfinished": 0, "walk_errors": 0,
           "invalid_other_drafts": 0, "failures": [], "other_draft_failures": [], "mean_tokens": 0.0}
    tokens = 0
    for k in range(n):
        rng = random.Random(seed * 1_000_003 + k)
        try:
            walk = walk_fn(rng)
        except Exception as e:  # noqa: BLE001 - a walk that breaks is counted, and said why
            out["walk_errors"] += 1
            out.setdefault("walk_error", f"{type(e).__name__}: {e}"[:300])
            continue
        tokens += len(walk.tokens)
        if not walk.finished:
            out["unfinished"] += 1
            continue
        verdict = judge.check(walk.text)
        out[verdict.status] += 1
        text = walk.text.decode("utf-8", "backslashreplace")
        if verdict.status != "valid" and len(out["failures"]) < keep:
            out["failures"].append({"status": verdict.status, "text": text[:2000], "error": verdict.error})
        for draft, v in judge.check_other_drafts(walk.text) if verdict.status == "valid" else []:
            if v.status == "invalid":
                out["invalid_other_drafts"] += 1
                if len(out["other_draft_failures"]) < keep:
                    out["other_draft_failures"].append({"draft": draft, "text": text[:2000], "error": v.error})
                break
    out["mean_tokens"] = tokens / n if n else 0.0
    return out


# --------------------------------------------------------------------------------------------
# Calls run inside a worker holding a `peers` adapter
# --------------------------------------------------------------------------------------------


def failed_call(err: str) -> dict:
    """The record of a compile whose worker call failed: timed out (the worker was killed) or
    the worker died."""
    return {"ok": False, "error": err, "error_class": "Timeout" if err.startswith("timed out") else "WorkerError"}


def compile_call(adapter, payload: dict) -> dict:
    """Compiles payload["schema"] and asks for the first mask; keeps the grammar on the adapter
    for `walk_call`. Onyx: also its DFA states."""
    adapter.last_compiled = None
    pc = time.perf_counter
    t0 = pc()
    try:
        obj = adapter.compile("schema", payload["schema"])
    except Exception as e:  # noqa: BLE001 - a refusal is this schema's result
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:400], "error_class": error_class(e)}
    t1 = pc()
    out = {"ok": True, "compile_ms": (t1 - t0) * 1e3}
    try:
        adapter.matcher(obj).mask()
        out["first_mask_ms"] = (pc() - t0) * 1e3
    except Exception as e:  # noqa: BLE001 - compiled, but no mask: said so
        out["first_mask_error"] = f"{type(e).__name__}: {e}"[:300]
    if adapter.name == "onyx":
        out["states"] = obj.num_states
        out["restriction"] = obj.restriction  # None: the exact language (see README, JSON Schema)
    adapter.last_compiled = obj
    return out


def walk_call(adapter, payload: dict) -> dict:
    """Random walks through the grammar `compile_call` kept, each text judged. Onyx: the full
    mask build first (timed; memory after it), unless `payload["eager"]` is false (then only
    the rows the walks visit are built, as for a request)."""
    obj = adapter.last_compiled
    vocab = getattr(adapter, "walk_vocab", None)
    if vocab is None:
        vocab = adapter.walk_vocab = WalkVocab(adapter.vd.tokens, adapter.vd.eos)
    judge = Judge(payload["schema"])
    extra = {"judge": judge.draft, "judge_how": judge.how}
    n, budget, seed = payload["walks"], payload["budget"], payload["seed"]
    if adapter.name == "onyx":
        t0 = time.perf_counter()
        try:
            if payload.get("eager", True):
                obj.build_all()
        except Exception as e:  # noqa: BLE001 - reported; the walks then fail on their own
            extra["build_error"] = f"{type(e).__name__}: {e}"[:300]
        extra["build_ms"] = (time.perf_counter() - t0) * 1e3
        extra["memory_bytes"] = int(obj.memory_bytes)
        walk = lambda rng: onyx_walk(obj, vocab, rng, budget)  # noqa: E731
    else:
        walk = lambda rng: matcher_walk(adapter.matcher(obj), vocab, rng, budget)  # noqa: E731
    return {**check_walks(walk, judge, n, seed), **extra}


def rss_call(_adapter, _payload) -> float | None:
    """The worker's resident memory in MB (Linux; None elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


class SchemaWorker:
    """`compile_call` and `walk_call` for one engine in a `harness.Worker`, started on first use,
    again after a call outlives its timeout (the harness kills that worker), and again once its
    resident memory passes `max_rss_mb` after a schema (`finish`). The last guard is needed:
    an Onyx `Grammar` stays alive for good once `token_bitmask` has handed out a view of one of
    its rows (the view's base is the grammar, which keeps the view: a cycle the garbage
    collector does not see), so a worker walking thousands of grammars would run out of memory.
    `restarts` counts the restarts by cause."""

    def __init__(self, engine: str, vocab: str, max_rss_mb: float = 4000.0, setup_timeout: float = 600.0):
        self.engine, self.vocab, self.max_rss_mb, self.setup_timeout = engine, vocab, max_rss_mb, setup_timeout
        self.worker: harness.Worker | None = None
        self.setup_error: str | None = peers.peer_available(engine)
        self.restarts: Counter = Counter()

    def _worker(self) -> harness.Worker | None:
        if self.setup_error is None and (self.worker is None or not self.worker.alive()):
            self.worker = harness.Worker(peers.open_adapter, (self.engine, self.vocab), self.setup_timeout)
            self.setup_error = self.worker.error
        return None if self.setup_error else self.worker

    def compile(self, schema, timeout: float) -> dict:
        """`compile_call`'s record, or a failed one (timeout, dead worker, no engine)."""
        w = self._worker()
        if w is None:
            return {"ok": False, "error": self.setup_error, "error_class": "EngineUnavailable"}
        res, err = w.run(compile_call, {"schema": schema}, timeout)
        if err:
            self.restarts["timeout" if err.startswith("timed out") else "died"] += 1
            return failed_call(err)
        return res

    def walk(self, schema, walks: int, budget: int, seed: int, timeout: float) -> dict:
        """`walk_call`'s record for the grammar just compiled; all walks failed when the call did."""
        res, err = self.worker.run(walk_call, {"schema": schema, "walks": walks, "budget": budget, "seed": seed},
                                   timeout)
        if err:
            self.restarts["timeout" if err.startswith("timed out") else "died"] += 1
            return {"walks": walks, "valid": 0, "invalid": 0, "unjudged": 0, "unfinished": 0,
                    "walk_errors": walks, "walk_error": err, "failures": [], "other_draft_failures": []}
        return res

    def finish(self) -> None:
        """After a schema: a worker over its memory limit is stopped (started again on demand)."""
        if self.worker is None or not self.worker.alive():
            return
        rss, err = self.worker.run(rss_call, None, 60)
        if err is None and rss is not None and rss > self.max_rss_mb:
            self.worker.close()
            self.restarts["memory"] += 1

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
