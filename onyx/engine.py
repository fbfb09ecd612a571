"""`onyx.Engine`: the one entry point the Python API, the server and the CLI all call.

    engine = onyx.Engine()                                   # the embedded default model
    r = engine.generate("Order ID:", regex=r"[A-Z]{3}-[0-9]{4}", max_tokens=16)
    r = engine.chat([{"role": "user", "content": "..."}], json_schema={...}, temperature=0.7, seed=1)
    for chunk in engine.chat(messages, regex="...", stream=True): print(chunk.text, end="")

A request flows: prompt → options (`onyx.options.GenerateOptions`, parsed once) → grammar
compile (`onyx.constraint.GrammarCache`, cached by pattern) → decoding loop
(`onyx.decoding.decode`) → token ids → text (`onyx.text.TextBuilder`: stop strings, UTF-8).
One generation runs at a time per engine (the KV pool and the model are shared); callers queue
on a lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from onyx.constraint import GrammarCache
from onyx.decoding import DecodeStats, Finish, ModelRunner, decode
from onyx.errors import ModelError, RequestError
from onyx.models import LoadedModel, load
from onyx.options import ConstraintSpec, GenerateOptions
from onyx.text import TextBuilder


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
        self.vocab = self.loaded.vocabulary
        self.draft_runner: ModelRunner | None = None
        if draft_model is not None:
            draft = load(draft_model)
            _check_same_vocabulary(self.loaded, draft)
            self.draft_runner = ModelRunner(draft)
        self.grammars = GrammarCache(self.vocab, self.loaded.vocab_size, grammar_cache_size)
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
        spec = ConstraintSpec.parse(regex, json_schema, max_whitespace)
        return None if spec is None else self.grammars.get(spec)[0]

    # -- prompts -----------------------------------------------------------------------------

    def prompt_ids(self, prompt: str | list[int]) -> list[int]:
        """Token ids of a plain-text prompt (or a list of ids, checked against the vocabulary)."""
        if isinstance(prompt, str):
            return self.loaded.encode(prompt)
        if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool)
                                            and 0 <= t < self.loaded.vocab_size for t in prompt):
            return list(prompt)
        raise RequestError("prompt must be a string or a list of token ids within the vocabulary", param="prompt")

    def chat_ids(self, messages: list[dict]) -> list[int]:
        """Token ids of a conversation, formatted with the model's own chat template."""
        return self.loaded.chat_ids(messages)

    # -- generation --------------------------------------------------------------------------

    def generate(self, prompt: str | list[int], *, stream: bool = False, cancel: threading.Event | None = None,
                 options: GenerateOptions | None = None, **kwargs: Any) -> Result | Iterator[Chunk]:
        """Continues a plain-text prompt (or a list of token ids). Options, as keyword arguments
        or a `GenerateOptions`: regex, json_schema, max_tokens (default 256), temperature
        (0 = greedy), top_p, top_k, min_p, seed, stop, speculative, num_draft_tokens,
        jump_forward, phi, max_whitespace. `cancel`, when set, stops the generation."""
        return self.start(self.prompt_ids(prompt), _options(options, kwargs), stream=stream, cancel=cancel)

    def chat(self, messages: list[dict], *, stream: bool = False, cancel: threading.Event | None = None,
             options: GenerateOptions | None = None, **kwargs: Any) -> Result | Iterator[Chunk]:
        """Answers a conversation, formatted with the model's own chat template. Same options as
        `generate`."""
        return self.start(self.chat_ids(messages), _options(options, kwargs), stream=stream, cancel=cancel)

    def start(self, ids: list[int], options: GenerateOptions, *, stream: bool = False,
              cancel: threading.Event | None = None) -> Result | Iterator[Chunk]:
        """Generates from prompt token ids. The constraint is compiled here, so a bad pattern
        raises before anything runs; with `stream`, the returned iterator has not started."""
        if not ids:
            raise RequestError("the prompt is empty", param="prompt")
        constraint = self.grammars.constraint(options.constraint)
        chunks = self._run(ids, options, constraint, cancel)
        if stream:
            return chunks
        final = None
        for chunk in chunks:
            final = chunk
        assert final is not None and final.result is not None
        return final.result

    def _run(self, ids, options: GenerateOptions, constraint, cancel) -> Iterator[Chunk]:
        t0 = time.perf_counter()
        with self._lock:
            text = TextBuilder(self.vocab, options.stop)
            tokens: list[int] = []
            run_stats = DecodeStats()
            steps = decode(self.runner, ids, options, constraint=constraint, draft_runner=self.draft_runner,
                           cancel=cancel, stats=run_stats)
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
            if constraint is None:
                valid = None
            elif text.stopped:
                valid = bool(constraint.grammar.validate(text.text))
            else:
                valid = constraint.accepting
            stats = run_stats.as_dict()
            stats["total_s"] = round(time.perf_counter() - t0, 6)
            self.last_stats = stats
            result = Result(text.text, tokens, reason, valid, stats)
            yield Chunk(tail, [], reason, result)

    # -- introspection -----------------------------------------------------------------------

    def stats(self) -> dict:
        """The engine's state: the KV pool's blocks and the grammar cache's size, compiles and
        hits."""
        return {"kv": self.runner.pool.stats(), "grammar_cache": self.grammars.stats()}


def _options(options: GenerateOptions | None, kwargs: dict) -> GenerateOptions:
    if options is None:
        return GenerateOptions.parse(**kwargs)
    if kwargs:
        raise RequestError("give options either as a GenerateOptions or as keyword arguments, not both",
                           param=sorted(kwargs)[0])
    return options


def _check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """A draft must speak the target's tokens: same ids for the same token strings."""
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if tv != dv:
        only_t = len(set(tv.items()) - set(dv.items()))
        raise ModelError(
            f"draft model {draft.name!r} does not share the target's vocabulary ({len(dv)} vs {len(tv)} "
            f"tokens, {only_t} target tokens differ); speculative decoding needs the same tokenizer")
