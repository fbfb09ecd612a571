"""Onyx's grammar core inside vLLM, as a structured-output backend named "onyx".

    pip install "onyx[vllm]"        # beside vLLM; declares the plug-in below
    vllm serve MODEL --structured-outputs-config.backend onyx

    from onyx.integrations import vllm as onyx_vllm
    onyx_vllm.register()            # in-process `LLM`: before it is made
    llm = LLM(model=..., structured_outputs_config={"backend": "onyx"})

vLLM chooses structured-output backends from a fixed list. `register` (run in every vLLM
process by the `vllm.general_plugins` entry point, which the `vllm` extra declares) adds "onyx"
to that list, to the request validation and to the engine's structured-output manager, which
then asks `OnyxBackend` for each request's grammar. Everything vLLM's structured outputs take
works: `json` (JSON Schema), `json_object`, `regex`, `choice` and `grammar` (Lark when it reads
as Lark, as vLLM decides for its own backends, else llama.cpp's GBNF); `structural_tag` is
refused. A schema or grammar Onyx refuses is refused when the request is validated (HTTP 400
from the server, `VLLMValidationError` from `LLM`), with Onyx's typed message; one that fails
later, in the engine, fails its request alone (`finish_reason` "error") and the engine keeps
serving.

Each request's grammar is an `onyx.grammar.constraint.Constraint` (the walk the engine and the
other integrations use), its masks Onyx's bitmask words as int32, which is the layout vLLM
fills, so `fill_bitmask` is one copy of a row made once per grammar state. Speculative tokens
are checked with `validate_tokens` and undone with `rollback`. vLLM does not tell a backend a
request's `max_tokens`, so masks here are not budget-aware (the engine's are).

Where plug-ins cannot be loaded, `OnyxLogitsProcessor` is the no-patch way in: a custom logits
processor (`vllm serve --logits-processors onyx.integrations.vllm:OnyxLogitsProcessor`, or
`LLM(logits_processors=[OnyxLogitsProcessor])`) that constrains the requests whose
`SamplingParams.extra_args` (the server's `vllm_xargs`) carry one of `onyx_regex`,
`onyx_json_schema` (JSON text), `onyx_grammar` (GBNF) or `onyx_lark`. vLLM refuses custom
logits processors under speculative decoding, an exception inside one would stop the engine
(so it never raises there: a constraint that fails to compile ends its request at once, with
only EOS allowed, and is logged), and it cannot see `max_tokens` either. It is not declared as
an entry point: vLLM would then load it into every engine, and refuse speculative decoding.

Importing this module imports vLLM and torch; `import onyx` alone imports neither.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import torch
from vllm.config import structured_outputs as _config
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates
from vllm.v1.structured_output import StructuredOutputManager
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)
from vllm.v1.structured_output.utils import grammar_is_likely_lark

from onyx.errors import GrammarError, RequestError
from onyx.grammar.constraint import Compiled, Constraint, unpack_bitmask
from onyx.integrations.common import compile_constraint, vocabulary_for
from onyx.options import ConstraintSpec

__all__ = ["BACKEND", "OnyxBackend", "OnyxGrammar", "OnyxLogitsProcessor", "register"]

log = logging.getLogger("onyx.vllm")

BACKEND = "onyx"
MASK_KIND = "vllm-int32"


# --- the backend ------------------------------------------------------------------------------


def spec_for(request_type: StructuredOutputOptions, grammar_spec: str) -> ConstraintSpec:
    """The Onyx constraint for one of vLLM's structured-output requests. Raises
    `onyx.RequestError` (or a `GrammarError` subclass) for one it cannot take."""
    if request_type == StructuredOutputOptions.JSON:
        return ConstraintSpec.parse(json_schema=grammar_spec)
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return ConstraintSpec.parse(json_schema={"type": "object"})
    if request_type == StructuredOutputOptions.REGEX:
        return ConstraintSpec.parse(regex=grammar_spec)
    if request_type == StructuredOutputOptions.CHOICE:
        choices = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
            raise RequestError("choice must be a non-empty list of strings", param="choice")
        return ConstraintSpec.parse(regex="|".join(regex_literal(c) for c in choices))
    if request_type == StructuredOutputOptions.GRAMMAR:
        if grammar_is_likely_lark(grammar_spec):
            return ConstraintSpec.parse(lark=grammar_spec)
        return ConstraintSpec.parse(grammar=grammar_spec)
    raise RequestError(f"the onyx backend does not take {request_type.name.lower()} requests",
                       param="structured_outputs")


def regex_literal(text: str) -> str:
    """`text` as a regex that matches exactly it."""
    return "".join("\\" + c if c in "\\^$.|?*+()[]{}/-" else c for c in text)


def _to_int32(words: np.ndarray, width: int) -> torch.Tensor:
    """A grammar bitmask as one row of vLLM's int32 bitmask `width` words wide (words past
    the tokenizer's vocabulary, in a model's padded vocabulary, are 0: never allowed)."""
    row = torch.zeros(width, dtype=torch.int32)
    n = min(width, words.shape[0])
    row[:n] = torch.from_numpy(np.array(words[:n], dtype=np.uint32).view(np.int32))
    return row


@dataclass
class OnyxBackend(StructuredOutputBackend):
    """vLLM's engine-level backend: compiles each request's grammar over the model's tokenizer
    (once per pattern: Onyx's grammar cache is shared by every request)."""

    def __post_init__(self) -> None:
        self.words = (self.vocab_size + 31) // 32

    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> StructuredOutputGrammar:
        spec = spec_for(request_type, grammar_spec)
        # The request's stop ids are the grammar's EOS: allowed exactly where the output may end.
        vocab = vocabulary_for(self.tokenizer, sorted(stop_token_ids) if stop_token_ids else None)
        compiled = compile_constraint(vocab, spec)
        masks = compiled.table(MASK_KIND, self.words, _to_int32)
        return OnyxGrammar(compiled=compiled, constraint=Constraint(compiled, masks))

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return torch.full((max_num_seqs, self.words), -1, dtype=torch.int32)

    def destroy(self) -> None:
        pass


@dataclass
class OnyxGrammar(StructuredOutputGrammar):
    """One request's walk through its grammar. The output is over (`is_terminated`) once one
    of its stop tokens is accepted; tokens after that are ignored, as vLLM expects."""

    compiled: Compiled
    constraint: Constraint

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        c = self.constraint
        for token in tokens:
            if c.ended:
                return True
            try:
                c.advance(token)
            except GrammarError as e:
                log.error("request %s: token %d is not allowed here (%s)", request_id, token, e)
                return False
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        c = self.constraint
        if c.ended:
            return []
        states = c.walk(tokens)
        accepted = tokens[:len(states) - 1]
        eos = self.compiled.eos_ids
        for i, token in enumerate(accepted):
            if token in eos:
                return accepted[:i + 1]
        return accepted

    def rollback(self, num_tokens: int) -> None:
        self.constraint.truncate(max(0, len(self.constraint.tokens) - num_tokens))

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        bitmask[batch_index].copy_(self.constraint.next_mask())

    def is_terminated(self) -> bool:
        return self.constraint.ended

    def reset(self) -> None:
        self.constraint = self.constraint.fresh()


# --- registration -----------------------------------------------------------------------------


def register() -> None:
    """Makes "onyx" a structured-output backend of vLLM in this process: the config's list of
    backends, the request validation and the engine's manager. Idempotent; the plug-in entry
    point runs it in every vLLM process."""
    backends = get_args(_config.StructuredOutputsBackend)
    if BACKEND not in backends:
        _add_config_choice(Literal[backends + (BACKEND,)])  # type: ignore[valid-type]
    if not getattr(SamplingParams._validate_structured_outputs, "_onyx", False):
        SamplingParams._validate_structured_outputs = _validating(SamplingParams._validate_structured_outputs)
    if not getattr(StructuredOutputManager.grammar_init, "_onyx", False):
        StructuredOutputManager.grammar_init = _initialising(StructuredOutputManager.grammar_init)


def _add_config_choice(choices: Any) -> None:
    """Widens `StructuredOutputsConfig.backend` (a pydantic dataclass field, also read by the
    CLI for its choices) to `choices`."""
    from pydantic.dataclasses import rebuild_dataclass

    cls = _config.StructuredOutputsConfig
    _config.StructuredOutputsBackend = choices
    cls.__annotations__["backend"] = choices
    cls.__dataclass_fields__["backend"].type = choices
    rebuild_dataclass(cls, force=True)


def _validating(original):
    """`SamplingParams._validate_structured_outputs`, with requests to the onyx backend checked
    here by compiling them (once per pattern in each process: the engine compiles again in its
    own), so a schema or grammar Onyx refuses is the client's error (HTTP 400, with Onyx's
    typed message) before it is queued. vLLM validates in the API server's event loop, so a
    new pattern's compilation holds other requests' input processing for its duration (at
    most Onyx's compile limit)."""

    def validate(self, model_config, structured_outputs_config, tokenizer) -> None:
        if structured_outputs_config is None or structured_outputs_config.backend != BACKEND:
            return original(self, model_config, structured_outputs_config, tokenizer)
        so = self.structured_outputs
        if so is None:
            return None
        if tokenizer is None:
            raise VLLMValidationError("structured outputs need a tokenizer (skip_tokenizer_init is set)")
        if so._backend not in (None, BACKEND):
            raise VLLMValidationError(f"request-level backend selection is not supported: vLLM runs "
                                      f"'{BACKEND}', the request asked for '{so._backend}'")
        so._backend = BACKEND
        from vllm.v1.structured_output.request import get_structured_output_key

        request_type, grammar_spec = get_structured_output_key(so)
        param = "structured_outputs." + request_type.name.lower()
        try:
            compile_constraint(vocabulary_for(tokenizer), spec_for(request_type, grammar_spec))
        except (RequestError, GrammarError, ValueError) as e:
            raise VLLMValidationError(f"{type(e).__name__}: {e}", parameter=param) from None
        return None

    validate._onyx = True
    return validate


def _initialising(original):
    """`StructuredOutputManager.grammar_init`, making the onyx backend on the first request
    that needs it (vLLM's own code makes only its own backends)."""

    def grammar_init(self, request) -> None:
        params = request.sampling_params
        so = params.structured_outputs if params is not None else None
        if self.backend is None and request.structured_output_request is not None and so is not None \
                and so._backend == BACKEND:
            self.backend = OnyxBackend(self.vllm_config, tokenizer=self.tokenizer,
                                       vocab_size=self.vllm_config.model_config.get_vocab_size())
        return original(self, request)

    grammar_init._onyx = True
    return grammar_init


# --- the logits processor ---------------------------------------------------------------------

# `extra_args` keys, and the `ConstraintSpec.parse` argument each one is.
EXTRA_ARGS = {"onyx_regex": "regex", "onyx_json_schema": "json_schema", "onyx_grammar": "grammar", "onyx_lark": "lark"}


def extra_args_spec(params: SamplingParams) -> ConstraintSpec | None:
    """The constraint a request's `extra_args` ask for, if any. Raises `onyx.RequestError`."""
    args = params.extra_args or {}
    given = {EXTRA_ARGS[k]: v for k, v in args.items() if k in EXTRA_ARGS}
    if not given:
        return None
    if len(given) > 1:
        raise RequestError(f"give one of {', '.join(EXTRA_ARGS)}, not several", param="extra_args")
    return ConstraintSpec.parse(**given)


class _Row:
    """One constrained request in the batch: its walk, and the list vLLM appends its tokens to."""

    def __init__(self, constraint: Constraint | None, output: list[int]) -> None:
        self.constraint = constraint  # None: its constraint failed; only EOS is allowed
        self.output = output


class OnyxLogitsProcessor(LogitsProcessor):
    """Constrains the requests whose `extra_args` name an Onyx constraint (see the module's
    docstring). Never raises from `update_state` or `apply`."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        try:
            extra_args_spec(sampling_params)
        except (RequestError, GrammarError) as e:
            raise VLLMValidationError(f"{type(e).__name__}: {e}", parameter="extra_args") from None

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        from vllm.tokenizers import cached_tokenizer_from_config

        self.tokenizer = cached_tokenizer_from_config(model_config=vllm_config.model_config)
        self.eos = [self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id is not None else None
        self.device = device
        self.rows: dict[int, _Row] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def _row(self, params: SamplingParams, _prompt: list[int] | None, output: list[int]) -> _Row | None:
        try:
            spec = extra_args_spec(params)
            if spec is None:
                return None
            vocab = vocabulary_for(self.tokenizer, self.eos)
            return _Row(Constraint(compile_constraint(vocab, spec)), output)
        except Exception as e:  # noqa: BLE001 - an exception here would stop the engine
            log.error("onyx constraint refused, the request ends now: %s: %s", type(e).__name__, e)
            return _Row(None, output)

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self.rows, batch_update, self._row)
        for row in self.rows.values():
            c = row.constraint
            if c is not None:
                try:
                    n = len(c.tokens)
                    if len(row.output) >= n and (n == 0 or row.output[n - 1] == c.tokens[-1]):
                        for token in row.output[n:]:  # the usual step: tokens were appended
                            c.advance(token)
                    else:
                        c.sync(row.output)
                except Exception as e:  # noqa: BLE001 - a token the mask forbade (should not happen)
                    log.error("onyx constraint lost its walk, the request ends now: %s", e)
                    row.constraint = None

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        width, device = logits.shape[-1], logits.device
        for index, row in self.rows.items():
            try:
                logits[index].masked_fill_(self._forbidden(row, width, device), float("-inf"))
            except Exception as e:  # noqa: BLE001 - never stop the engine
                log.error("onyx mask failed, the request ends now: %s", e)
                row.constraint = None
                logits[index].fill_(float("-inf"))
                logits[index, self.eos or []] = 0.0
        return logits

    def _forbidden(self, row: _Row, width: int, device: torch.device) -> torch.Tensor:
        """The tokens `row` may not take next, as a bool vector on `device` (the logits' device
        does not change), made once per grammar state."""
        if row.constraint is None:
            only = torch.ones(width, dtype=torch.bool)
            only[self.eos or []] = False
            return only.to(device)
        c = row.constraint
        if c.masks is None or c.masks.width != width:
            c.masks = c.compiled.table(f"torch-forbidden-{device}", width, _forbidden_on(device))
        return c.next_mask()


def _forbidden_on(device: torch.device):
    """A converter from grammar bitmasks to the forbidden tokens as a torch bool vector on
    `device` (ids past the vocabulary are forbidden)."""

    def convert(words: np.ndarray, width: int) -> torch.Tensor:
        return torch.from_numpy(~unpack_bitmask(words, width)).to(device)

    return convert
