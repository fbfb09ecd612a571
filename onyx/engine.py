"""`onyx.Engine`: the one entry point the Python API, the server and the CLI all call.

    engine = onyx.Engine()                                   # the embedded default model
    r = engine.generate("Order ID:", regex=r"[A-Z]{3}-[0-9]{4}", max_tokens=16)
    r = engine.chat([{"role": "user", "content": "..."}], json_schema={...}, temperature=0.7, seed=1)
    for chunk in engine.chat(messages, regex="...", stream=True): print(chunk.text, end="")

A request flows: prompt → grammar compile (cached by pattern) → decoding loop (`onyx.decode`)
→ token ids → text. One generation runs at a time per engine (the KV pool and the model are
shared); callers queue on a lock.
"""

from __future__ import annotations

import codecs
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterator

import onyx._grammar as _g
from onyx.decode import DecodeStats, Finish, ModelRunner, SpecConfig, decode
from onyx.models import LoadedModel, ModelError, load
from onyx.sampling import MaskCache, SamplingParams
from onyx.vocabulary import Vocabulary


class RequestError(ValueError):
    """A bad argument to generate/chat (the server answers 400)."""


@dataclass
class Result:
    """A finished generation."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" or "length" ("cancelled" when the caller stopped it)
    valid: bool | None  # does the text match the constraint? None when unconstrained
    stats: dict = field(default_factory=dict)


@dataclass
class Chunk:
    """A piece of a streamed generation. The last chunk has `finish_reason` and `result` set."""

    text: str
    token_ids: list[int]
    finish_reason: str | None = None
    result: Result | None = None


class Engine:
    """A loaded model plus everything needed to constrain it."""

    def __init__(self, model: str | None = None, draft_model: str | None = None, *,
                 grammar_cache_size: int = 128) -> None:
        self.loaded: LoadedModel = load(model)
        self.runner = ModelRunner(self.loaded)
        self.vocab = _vocabulary(self.loaded)
        self.draft_runner: ModelRunner | None = None
        if draft_model is not None:
            draft = load(draft_model)
            _check_same_vocabulary(self.loaded, draft)
            self.draft_runner = ModelRunner(draft)
        self._grammars: OrderedDict[tuple, tuple[Any, MaskCache]] = OrderedDict()
        self._grammar_cache_size = grammar_cache_size
        self._grammar_lock = threading.Lock()
        self._lock = threading.Lock()
        self.last_stats: dict = {}

    @property
    def model_name(self) -> str:
        return self.loaded.name

    # -- constraints -------------------------------------------------------------------------

    def compile(self, *, regex: str | None = None, json_schema: Any = None,
                max_whitespace: int = 0) -> Any | None:
        """The compiled grammar for a regex or a JSON Schema (dict or JSON string), cached by
        pattern; None when neither is given. Raises a subclass of `onyx.GrammarError`."""
        return self._constraint(regex, json_schema, max_whitespace)[0]

    def _constraint(self, regex, json_schema, max_whitespace: int = 0) -> tuple[Any, MaskCache | None]:
        if regex is not None and json_schema is not None:
            raise RequestError("give either regex or json_schema, not both")
        if regex is None and json_schema is None:
            return None, None
        if regex is not None:
            if not isinstance(regex, str):
                raise RequestError(f"regex must be a string, not {type(regex).__name__}")
            key = ("regex", regex)
        else:
            try:
                text = json_schema if isinstance(json_schema, str) else json.dumps(json_schema, sort_keys=False)
            except (TypeError, ValueError) as e:
                raise _g.InvalidSchemaError(f"invalid JSON Schema at #: not JSON-serialisable: {e}") from None
            key = ("schema", text, max_whitespace)
        with self._grammar_lock:
            hit = self._grammars.get(key)
            if hit is not None:
                self._grammars.move_to_end(key)
                return hit
        if regex is not None:
            grammar = self.vocab.compile_regex(regex)
        else:
            grammar = self.vocab.compile_json_schema(key[1], max_whitespace=max_whitespace)
        entry = (grammar, MaskCache(grammar, self.loaded.vocab_size))
        with self._grammar_lock:
            self._grammars[key] = entry
            while len(self._grammars) > self._grammar_cache_size:
                self._grammars.popitem(last=False)
        return entry

    # -- generation --------------------------------------------------------------------------

    def generate(self, prompt: str | list[int], *, stream: bool = False, **options: Any) -> Result | Iterator[Chunk]:
        """Continues a plain-text prompt (or a list of token ids). Options: regex, json_schema,
        max_tokens (default 256), temperature (0 = greedy), top_p, top_k, min_p, seed, stop."""
        if isinstance(prompt, str):
            ids = self.loaded.encode(prompt)
        elif isinstance(prompt, list) and all(isinstance(t, int) and 0 <= t < self.loaded.vocab_size for t in prompt):
            ids = list(prompt)
        else:
            raise RequestError("prompt must be a string or a list of token ids within the vocabulary")
        return self._start(ids, stream, options)

    def chat(self, messages: list[dict], *, stream: bool = False, **options: Any) -> Result | Iterator[Chunk]:
        """Answers a conversation, formatted with the model's own chat template. Same options as
        `generate`."""
        return self._start(self.chat_prompt_ids(messages), stream, options)

    def chat_prompt_ids(self, messages: list[dict]) -> list[int]:
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages must be a non-empty list of {role, content} objects")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise RequestError("each message needs a string 'role' and a string 'content'")
        tok = self.loaded.tokenizer
        if not getattr(tok, "chat_template", None):
            return self.loaded.encode("\n".join(m["content"] for m in messages))
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(tok.encode(text, add_special_tokens=False))

    def _start(self, ids: list[int], stream: bool, options: dict) -> Result | Iterator[Chunk]:
        request = self._parse_options(ids, options)
        chunks = self._run(*request)
        if stream:
            return chunks
        final = None
        for chunk in chunks:
            final = chunk
        assert final is not None and final.result is not None
        return final.result

    def _parse_options(self, ids: list[int], options: dict) -> tuple:
        known = {"regex", "json_schema", "max_tokens", "temperature", "top_p", "top_k", "min_p",
                 "seed", "stop", "max_whitespace", "cancel", "speculative", "num_draft_tokens", "jump_forward",
                 "phi"}
        unknown = set(options) - known
        if unknown:
            raise RequestError(f"unknown option(s): {', '.join(sorted(unknown))}")
        max_tokens = options.get("max_tokens", 256)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise RequestError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if not ids:
            raise RequestError("the prompt is empty")
        try:
            params = SamplingParams(
                temperature=float(options.get("temperature", 0.0) or 0.0),
                top_p=float(options.get("top_p", 1.0) if options.get("top_p") is not None else 1.0),
                top_k=int(options.get("top_k", 0) or 0),
                min_p=float(options.get("min_p", 0.0) or 0.0),
                seed=options.get("seed"),
            )
        except (TypeError, ValueError) as e:
            raise RequestError(str(e)) from None
        if params.seed is not None and (isinstance(params.seed, bool) or not isinstance(params.seed, int)):
            raise RequestError(f"seed must be an integer, got {params.seed!r}")
        stop = options.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise RequestError("stop must be a non-empty string or a list of them")
        grammar, masks = self._constraint(options.get("regex"), options.get("json_schema"),
                                          int(options.get("max_whitespace", 0) or 0))
        phi = options.get("phi") or "none"
        if phi not in ("none", "onestep", "exact"):
            raise RequestError(f"phi must be 'none', 'onestep' or 'exact', got {phi!r}")
        if phi != "none" and grammar is None:
            raise RequestError("phi reweighting needs a regex or json_schema constraint")
        try:
            spec = SpecConfig(mode=options.get("speculative") or "aware",
                              gamma=options.get("num_draft_tokens") if options.get("num_draft_tokens") is not None else "auto",
                              draft=self.draft_runner, jump_forward=bool(options.get("jump_forward", True)),
                              tokenizer=self.loaded.tokenizer, vocab=self.vocab, phi=_make_phi(phi))
        except ValueError as e:
            raise RequestError(str(e)) from None
        return ids, grammar, masks, params, max_tokens, stop, options.get("cancel"), spec

    def _run(self, ids, grammar, masks, params, max_tokens, stop, cancel, spec) -> Iterator[Chunk]:
        t0 = time.perf_counter()
        with self._lock:
            text = _TextBuilder(self.vocab, stop)
            tokens: list[int] = []
            run_stats = DecodeStats()
            steps = decode(self.runner, ids, grammar=grammar, masks=masks, params=params,
                           max_tokens=max_tokens, cancel=cancel, stats=run_stats, spec=spec)
            reason = "stop"
            try:
                for event in steps:
                    if isinstance(event, Finish):
                        reason = event.reason
                        break
                    tokens.append(event)
                    delta = text.push(event)
                    if text.stopped:
                        break
                    if delta:
                        yield Chunk(delta, [event])
            finally:
                steps.close()
            tail = text.flush()
            if grammar is None:
                valid = None
            elif text.stopped:
                valid = bool(grammar.validate(text.text))
            else:
                valid = bool(grammar.is_accepting(run_stats.extra["grammar_state"]))
            stats = run_stats.as_dict()
            stats["total_s"] = round(time.perf_counter() - t0, 6)
            self.last_stats = stats
            result = Result(text.text, tokens, reason, valid, stats)
            yield Chunk(tail, [], reason, result)


class _TextBuilder:
    """Token ids → text: exact token bytes, incremental UTF-8, and stop strings (text from a
    stop string on is dropped; text that could begin one is held back while streaming)."""

    def __init__(self, vocab, stop: list[str]) -> None:
        self.vocab = vocab
        self.stop = stop
        self.hold = max((len(s) for s in stop), default=1) - 1
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.emitted = 0
        self.stopped = False

    def push(self, token: int) -> str:
        self.text += self.decoder.decode(self.vocab.token_bytes(token))
        if self.stop:
            start = max(0, self.emitted - self.hold)
            cut = min((i for i in (self.text.find(s, start) for s in self.stop) if i >= 0), default=-1)
            if cut >= 0:
                self.text = self.text[:cut]
                self.stopped = True
                return ""
        end = max(self.emitted, len(self.text) - self.hold) if self.stop else len(self.text)
        delta = self.text[self.emitted:end]
        self.emitted = end
        return delta

    def flush(self) -> str:
        if not self.stopped:
            self.text += self.decoder.decode(b"", final=True)
        delta = self.text[self.emitted:]
        self.emitted = len(self.text)
        return delta


def _make_phi(kind: str):
    """The Φ provider for `phi=` (onyx/phi.py), or None."""
    if kind == "none":
        return None
    from onyx.phi import make_phi

    return make_phi(kind)


def _check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """A draft must speak the target's tokens: same ids for the same token strings."""
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if tv != dv:
        only_t = len(set(tv.items()) - set(dv.items()))
        raise ModelError(
            f"draft model {draft.name!r} does not share the target's vocabulary ({len(dv)} vs {len(tv)} "
            f"tokens, {only_t} target tokens differ); speculative decoding needs the same tokenizer")


def _vocabulary(loaded: LoadedModel) -> Vocabulary:
    """The grammar core's vocabulary for a model: its tokenizer, the model's EOS ids, and masks as
    wide as the logits. The tokenizer self-test runs here (a mismatch warns)."""
    try:
        return Vocabulary.from_hf(loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                                  vocab_size=loaded.vocab_size)
    except _g.VocabularyError as e:
        if "smaller than" not in str(e):
            raise
        # The tokenizer names more ids than the model has logits; masks are cut to the logits.
        return Vocabulary.from_hf(loaded.tokenizer, eos_token_ids=loaded.eos_token_ids)
