"""`onyx.Engine`: the one entry point the Python API, the server and the CLI all call.

    engine = onyx.Engine()                                   # the embedded default model
    r = engine.generate("Order ID:", regex=r"[A-Z]{3}-[0-9]{4}", max_tokens=16)
    r = engine.chat([{"role": "user", "content": "..."}], json_schema={...}, temperature=0.7, seed=1)
    for chunk in engine.chat(messages, regex="...", stream=True): print(chunk.text, end="")
    rs = engine.generate_many(["a", "b", "c"], max_tokens=32)            # decoded together
    rs = engine.chat(messages, n=4, temperature=0.9)                     # four samples, one prefill
    r = engine.chat(messages, tools=[...], tool_choice="required")      # r.tool_calls, parsed

A request flows: prompt → options (`onyx.options.GenerateOptions`, parsed once) → grammar
compile (`onyx.grammar.constraint.GrammarCache`, cached by pattern, in the caller's thread so a
bad pattern raises at once; a chat request's tools and thinking block are composed into one
structure first, `onyx.chat.setup`) → the engine's scheduler (`onyx.scheduler`), whose one
worker thread decodes every active request in one batched step (`onyx.decoding.batch`) → token
ids → each sample's output (`onyx.scheduler.output`: text, stop strings and, for chat, the
output parser: reasoning, content, tool calls). Calls from several threads, and the prompts of
`generate_many`, decode side by side; each keeps its own options, constraint and random stream.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Iterator

from onyx.chat.setup import ChatFormat, ChatSetup, prepare_chat
from onyx.decoding import ModelRunner
from onyx.decoding.runner import PREFILL_CHUNK
from onyx.decoding.sampling import mask_to_mlx
from onyx.errors import ModelError, RequestError
from onyx.grammar.constraint import GRAMMAR_CACHE_BYTES, GRAMMAR_CACHE_SIZE, Constraint, GrammarCache
from onyx.models.loader import LoadedModel, load
from onyx._grammar import set_compile_nice
from onyx.options import (COMPILE_NICE, COMPILE_SHARE, DEFAULT_MAX_BATCH, PREFILL_SHARE, ConstraintSpec,
                          GenerateOptions)
from onyx.scheduler import Chunk, Request, Result, Scheduler

__all__ = ["Chunk", "Engine", "Result"]


class Engine:
    """A loaded model plus everything needed to constrain it."""

    def __init__(self, model: str | None = None, draft_model: str | None = None, *,
                 dtype: str | None = None,
                 grammar_cache_size: int = GRAMMAR_CACHE_SIZE, grammar_cache_bytes: int = GRAMMAR_CACHE_BYTES,
                 max_batch: int = DEFAULT_MAX_BATCH, max_queue: int | None = None,
                 prefill_chunk: int = PREFILL_CHUNK, prefill_share: float = PREFILL_SHARE,
                 compile_nice: int = COMPILE_NICE, compile_share: float = COMPILE_SHARE) -> None:
        """`dtype`: how weights are held, "quantized" (default: quantized weights stay quantized,
        on Metal and on the CPU) or "float32" (see `onyx.models.loader.load`);
        `grammar_cache_bytes`: what compiled grammars and their masks may hold (least
        recently used dropped past it; within one grammar, the rows and masks used least
        lately, past the smaller of this and `onyx.options.MAX_INDEX_BYTES`); `max_batch`: sequences decoded together at most (more wait in
        the queue); `max_queue`: requests that may wait (more raise `QueueFullError`; None: no limit);
        `prefill_chunk`: prompt tokens per batched step; `prefill_share`: while other
        sequences decode, the most a prompt's prefill may add to a step's time (0.25: a long
        prompt arriving slows the running streams by at most a quarter); `compile_nice`: the
        nice value (0-19) grammar compilations run at, so that they yield the cores to the
        sequences decoding (Linux only; 0 keeps the caller's priority). It applies to the whole
        process, and the first value that lowered a compilation stays; `compile_share`: while
        sequences decode, compilations pause during each step and get this share of a plain
        decode step per step between steps, after the shorter ones first (0: they run beside
        the steps at their nice value)."""
        if not 0 <= compile_nice <= 19:
            raise ValueError(f"compile_nice must be between 0 and 19, got {compile_nice}")
        set_compile_nice(compile_nice)
        self.loaded: LoadedModel = load(model, dtype=dtype)
        self.runner = ModelRunner(self.loaded)
        self.vocab = self.loaded.vocabulary
        self.draft_runner: ModelRunner | None = None
        if draft_model is not None:
            draft = load(draft_model, dtype=dtype)
            _check_same_vocabulary(self.loaded, draft)
            self.draft_runner = ModelRunner(draft)
        self.grammars = GrammarCache(self.vocab, grammar_cache_size, grammar_cache_bytes)
        self.chat_format = ChatFormat.from_tokenizer(self.loaded.tokenizer, self.vocab)
        self.scheduler = Scheduler(self.runner, self.draft_runner, vocab=self.vocab, max_batch=max_batch,
                                   max_queue=max_queue, prefill_chunk=prefill_chunk, prefill_share=prefill_share,
                                   compile_share=compile_share)

    @property
    def last_stats(self) -> dict:
        """The statistics of the generation that ended last."""
        return self.scheduler.last_stats

    @property
    def model_name(self) -> str:
        return self.loaded.name

    def describe(self) -> dict:
        """What the engine runs: the model's name, device, weight dtype, context length and
        vocabulary size, and the batch's limits."""
        m = self.loaded
        return {"model": m.name, "device": m.device, "dtype": m.dtype, "context_length": m.context_length,
                "vocab_size": m.vocab_size, "max_batch": self.scheduler.max_batch,
                "max_queue": self.scheduler.max_queue,
                "draft_model": self.draft_runner.loaded.name if self.draft_runner is not None else None}

    def configure(self, *, max_queue: int | None = None) -> None:
        """Changes settings of a running engine: `max_queue`, the requests that may wait (more
        raise `QueueFullError`; None: no limit)."""
        self.scheduler.max_queue = max_queue

    def cancel_all(self, timeout: float = 10.0) -> None:
        """Cancels every queued and running request and waits (up to `timeout` seconds) until
        they have ended; the engine stays usable."""
        self.scheduler.cancel_all(timeout)

    # -- constraints -------------------------------------------------------------------------

    def compile(self, *, regex: str | None = None, json_schema: Any = None,
                max_whitespace: int | None = None) -> Any | None:
        """The compiled grammar for a regex or a JSON Schema (dict or JSON string), cached by
        pattern; None when neither is given. Raises a subclass of `onyx.GrammarError`."""
        spec = ConstraintSpec.parse(regex, json_schema, max_whitespace)
        return None if spec is None else self.grammars.get(spec).grammar

    def constraint(self, spec: ConstraintSpec | None) -> Constraint | None:
        """A fresh constraint for `spec` (compiled once per pattern), with MLX masks as wide as
        the model's logits; None when unconstrained."""
        if spec is None:
            return None
        compiled = self.grammars.get(spec)
        return Constraint(compiled, compiled.table("mlx", self.loaded.vocab_size, mask_to_mlx))

    def shortest_answer(self, options: GenerateOptions) -> int | None:
        """The fewest tokens of any output valid under `options`' constraint (for a chat request,
        the options of its setup, where tools and the thinking block are composed in); None when
        unconstrained, or when only a bound is known (a pushdown grammar counts bytes)."""
        if options.constraint is None:
            return None
        grammar = self.grammars.get(options.constraint).grammar
        if getattr(grammar, "is_pushdown", False):
            return None
        return int(grammar.min_tokens_to_accept(grammar.initial_state))

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
        return self.prepare_chat(messages, GenerateOptions())[0]

    def prepare_chat(self, messages: list[dict], options: GenerateOptions) -> tuple[list[int], ChatSetup]:
        """The prompt's token ids and the request's setup (`onyx.chat.setup.ChatSetup`: the
        options with the composed constraint, the output's reading). Raises `RequestError`."""
        return prepare_chat(self.loaded, self.chat_format, messages, options)

    # -- generation --------------------------------------------------------------------------

    def generate(self, prompt: str | list[int], *, stream: bool = False, cancel: threading.Event | None = None,
                 options: GenerateOptions | None = None, **kwargs: Any) -> Result | list[Result] | Iterator[Chunk]:
        """Continues a plain-text prompt (or a list of token ids). Options, as keyword arguments
        or a `GenerateOptions`: regex, json_schema, max_tokens (default 256), temperature
        (0 = greedy), top_p, top_k, min_p, seed, stop, speculative, num_draft_tokens,
        jump_forward, phi, max_whitespace, n, structure, logprobs, top_logprobs, logit_bias,
        presence_penalty, frequency_penalty. `cancel`, when set, stops the generation. With
        n > 1 the answer is a list of n results (streamed chunks carry their sample's `index`)."""
        return self.start(self.prompt_ids(prompt), _plain(_options(options, kwargs)), stream=stream, cancel=cancel)

    def chat(self, messages: list[dict], *, stream: bool = False, cancel: threading.Event | None = None,
             options: GenerateOptions | None = None, **kwargs: Any) -> Result | list[Result] | Iterator[Chunk]:
        """Answers a conversation, formatted with the model's own chat template. The options of
        `generate`, and tools (OpenAI function tools), tool_choice (`"none"`, `"auto"`,
        `"required"` or a named function), parallel_tool_calls and max_reasoning_tokens. Messages
        may hold assistant `tool_calls` and `role: "tool"` results. The `Result` has the calls
        parsed (`tool_calls`, `finish_reason="tool_calls"`), the answer's `content` and the
        thinking's `reasoning_content`; streamed chunks carry the same as `deltas`."""
        ids, setup = self.prepare_chat(messages, _options(options, kwargs))
        return self.start(ids, setup.options, stream=stream, cancel=cancel, setup=setup)

    def generate_many(self, prompts: list[str | list[int]], options: GenerateOptions | list | None = None,
                      **kwargs: Any) -> list:
        """Runs several prompts together (one batch), each with its own options: `options` is one
        `GenerateOptions` for all, or a list with one `GenerateOptions` or dict of keyword
        options per prompt; keyword arguments apply to every prompt. Returns one `Result` per
        prompt (a list of n results for a prompt with n > 1), in order."""
        return self._many([self.prompt_ids(p) for p in prompts], options, kwargs)

    def chat_many(self, conversations: list[list[dict]], options: GenerateOptions | list | None = None,
                  **kwargs: Any) -> list:
        """`generate_many` for conversations (with `chat`'s options)."""
        return self._many(conversations, options, kwargs, chat=True)

    def start(self, ids: list[int], options: GenerateOptions, *, stream: bool = False,
              cancel: threading.Event | None = None,
              setup: ChatSetup | None = None) -> Result | list[Result] | Iterator[Chunk]:
        """Generates from prompt token ids. The constraint is compiled here, so a bad pattern
        raises before anything runs; with `stream`, the returned iterator has not started (it
        joins the batch on its first `next`, and closing it stops the generation and frees its
        KV blocks before `close` returns). `setup` (from `prepare_chat`) reads a chat answer."""
        constraints = self._constraints(ids, options)
        if stream:
            return self._stream(self._request(ids, options, constraints, setup, cancel=cancel or threading.Event(),
                                              on_event=None))
        results = self._wait([self._submit_collect(ids, options, constraints, cancel, setup)])[0]
        return results if options.n > 1 else results[0]

    def submit(self, ids: list[int], options: GenerateOptions, *, on_event, on_end=None,
               cancel: threading.Event | None = None, setup: ChatSetup | None = None) -> Request:
        """Queues a generation and returns at once (the server's way in): `on_event(index, item)`
        gets each sample's `Chunk`s (the last one carries its `Result`) or the exception that
        ended it, and `on_end()` runs when all samples have ended; both from the scheduler's
        thread. Raises `QueueFullError` when the queue is full, or a `RequestError` / grammar
        error for a bad request."""
        request = self._request(ids, options, self._constraints(ids, options), setup, cancel=cancel,
                                on_event=on_event, on_end=on_end)
        self.scheduler.submit(request)
        return request

    def _request(self, ids, options, constraints, setup: ChatSetup | None, **kwargs) -> Request:
        if any(c is not None for c in constraints):
            kwargs["on_end"] = self._trim_grammars_after(kwargs.get("on_end"))
        if setup is None:
            options = _plain(options)
            _check_bias(options, self.loaded.vocab_size)
            return Request(ids, options, constraints, **kwargs)
        _check_bias(options, self.loaded.vocab_size)
        return Request(ids, options, constraints, output=setup.output_parser if setup.parses_output else None,
                       budget=setup.budget, **kwargs)

    def _trim_grammars_after(self, on_end: Callable[[], None] | None) -> Callable[[], None]:
        """`on_end`, after the grammar cache is brought back within its bytes: a grammar grows by
        the token rows its requests visit, after the lookup that last trimmed the cache."""
        def end() -> None:
            self.grammars.trim()
            if on_end is not None:
                on_end()
        return end

    def close(self) -> None:
        """Stops the scheduler (cancelling what is queued or running)."""
        self.scheduler.close()

    def _constraints(self, ids: list[int], options: GenerateOptions) -> list:
        if not ids:
            raise RequestError("the prompt is empty", param="prompt")
        return [self.constraint(options.constraint) for _ in range(options.n)]

    def _stream(self, request: Request) -> Iterator[Chunk]:
        events: queue.SimpleQueue = queue.SimpleQueue()
        request.on_event = lambda i, item: events.put(item)
        request.on_end = lambda: events.put(None)
        self.scheduler.submit(request)
        try:
            while True:
                item = events.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not request.ended.is_set():
                self.scheduler.cancel(request, wait=True)

    def _submit_collect(self, ids, options, constraints, cancel, setup=None) -> tuple[Request, list]:
        results: list = [None] * options.n

        def on_event(i: int, item) -> None:
            if isinstance(item, BaseException):
                results[i] = item
            elif item.result is not None:
                results[i] = item.result

        request = self._request(ids, options, constraints, setup, cancel=cancel, on_event=on_event)
        self.scheduler.submit(request)
        return request, results

    def _wait(self, pending: list[tuple[Request, list]]) -> list[list]:
        try:
            for request, _ in pending:
                request.ended.wait()
        except BaseException:  # interrupted: stop what is still running
            for request, _ in pending:
                self.scheduler.cancel(request, wait=True)
            raise
        for _, results in pending:
            for item in results:
                if isinstance(item, BaseException):
                    raise item
        return [results for _, results in pending]

    def _many(self, inputs: list, options, kwargs: dict, chat: bool = False) -> list:
        if isinstance(options, (list, tuple)):
            if len(options) != len(inputs):
                raise RequestError(f"{len(options)} options for {len(inputs)} prompts", param="options")
            opts = [o if isinstance(o, GenerateOptions) else GenerateOptions.parse(**{**kwargs, **o})
                    for o in options]
        else:
            opts = [_options(options, kwargs)] * len(inputs)
        setups: list = [None] * len(inputs)
        if chat:
            ids_list = []
            for i, (m, o) in enumerate(zip(inputs, opts)):
                ids, setups[i] = self.prepare_chat(m, o)
                ids_list.append(ids)
                opts[i] = setups[i].options
        else:
            ids_list = inputs
        prepared = [(ids, o, self._constraints(ids, o), st) for ids, o, st in zip(ids_list, opts, setups)]
        pending = []
        try:
            for ids, o, constraints, st in prepared:
                pending.append(self._submit_collect(ids, o, constraints, None, st))
        except BaseException:
            for request, _ in pending:
                self.scheduler.cancel(request)
            raise
        out = self._wait(pending)
        return [results if o.n > 1 else results[0] for results, o in zip(out, opts)]

    # -- introspection -----------------------------------------------------------------------

    def stats(self) -> dict:
        """The engine's state: the KV pool's blocks, the grammar cache's size, compiles and hits,
        and the batch (active rows, queued requests, reserved KV blocks)."""
        return {"kv": self.runner.pool.stats(), "grammar_cache": self.grammars.stats(),
                "batch": self.scheduler.stats()}


def _options(options: GenerateOptions | None, kwargs: dict) -> GenerateOptions:
    if options is None:
        return GenerateOptions.parse(**kwargs)
    if kwargs:
        raise RequestError("give options either as a GenerateOptions or as keyword arguments, not both",
                           param=sorted(kwargs)[0])
    return options


def _plain(options: GenerateOptions) -> GenerateOptions:
    """Options of a request without a conversation: chat-only options are refused."""
    if options.tools is not None:
        raise RequestError("tools need a conversation (chat)", param="tools")
    if options.max_reasoning_tokens is not None:
        raise RequestError("max_reasoning_tokens needs a conversation (chat)", param="max_reasoning_tokens")
    if options.reasoning_effort is not None:
        raise RequestError("reasoning_effort needs a conversation (chat)", param="reasoning_effort")
    return options


def _check_bias(options: GenerateOptions, width: int) -> None:
    for t, _ in options.adjust.logit_bias:
        if t >= width:
            raise RequestError(f"logit_bias names token {t}, outside the vocabulary of {width}", param="logit_bias")


def _check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """A draft must speak the target's tokens: same ids for the same token strings."""
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if tv != dv:
        only_t = len(set(tv.items()) - set(dv.items()))
        raise ModelError(
            f"draft model {draft.name!r} does not share the target's vocabulary ({len(dv)} vs {len(tv)} "
            f"tokens, {only_t} target tokens differ); speculative decoding needs the same tokenizer")
