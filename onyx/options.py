"""The options of one generation, parsed and validated once.

`GenerateOptions` is the one typed home of every per-request option. The Python API builds it
from keyword arguments (`GenerateOptions.parse(**kwargs)`), the server from a request body, the
CLI from its flags; the engine and the decoding loop then read typed fields only. A bad value
raises `RequestError` whose `param` is the field's name, as the API spells it.

    options = GenerateOptions.parse(max_tokens=64, temperature=0.7, seed=1,
                                    json_schema={"type": "object"}, speculative="aware")
    options.sampling.temperature, options.constraint.json_schema, options.speculation.num_draft_tokens

Groups: `SamplingParams` (temperature, top-k/p, min-p, seed), `ConstraintSpec` (regex, JSON
Schema or a structure spec, whitespace), `Speculation` (draft mode, draft count, jump-forward),
`LogitAdjustments` (logit_bias, presence and frequency penalties, applied before the mask),
`ToolOptions` (tools, tool_choice, parallel_tool_calls: chat only), and on the top level
`max_tokens`, `stop`, `phi`, `n` (samples of the same prompt, decoded side by side in the batch
from one prefill; with a seed, sample i uses seed + i), `logprobs` (None, or how many
alternatives each token's entry lists), `max_reasoning_tokens` or `reasoning_effort` (a bound on the
thinking block) and `prediction` (text the output likely repeats, a source of drafts).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from onyx.errors import InvalidSchemaError, RequestError

DEFAULT_MAX_TOKENS = 256  # a generation's max_tokens when none is given
DEFAULT_MAX_BATCH = 8  # sequences an engine decodes together
MAX_SAMPLES = 16  # n: samples of one prompt
MAX_DRAFT_TOKENS = 32
MAX_TOP_LOGPROBS = 20
SPECULATIVE_MODES = ("baseline", "blind", "aware")
# OpenAI's reasoning_effort as a bound on the thinking block, in tokens (None: unbounded); used
# where the chat template has a thinking block, ignored where it has none.
REASONING_EFFORT = {"none": 1, "minimal": 64, "low": 256, "medium": 1024, "high": 4096, "xhigh": None}
PHI_KINDS = ("none", "onestep", "exact")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"{name} must be a number, got {value!r}", param=name)
    value = float(value)
    if math.isnan(value):
        raise RequestError(f"{name} must be a number, got NaN", param=name)
    return value


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {value!r}", param=name)
    return value


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise RequestError(f"{name} must be true or false, got {value!r}", param=name)
    return value


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        spelled = ", ".join(repr(a) for a in allowed[:-1]) + f" or {allowed[-1]!r}"
        raise RequestError(f"{name} must be {spelled}, got {value!r}", param=name)
    return value


# Bytes a grammar cache may hold: room beside a small model on a laptop.
GRAMMAR_CACHE_BYTES = 1 << 30
# Bytes one grammar's token index and one of its mask tables may each hold (the grammar core's
# default): past them the rows and masks not used lately are dropped and made again on a visit.
MAX_INDEX_BYTES = 256 << 20
# While sequences decode, the share of a plain decode step's time a new prompt's prefill may add
# to each step on average: well under the quarter the co-batch gate allows, since the running
# streams' steps also vary by themselves and widen with the arriving requests' own rows.
PREFILL_SHARE = 0.15
# Nice value grammar compilations run at while sequences decode (Linux; 0: the caller's own).
COMPILE_NICE = 10
# While sequences decode, running grammar compilations get this share of a plain decode step
# per step, between steps (they pause during steps: `onyx.decoding.batch`): a step padded by
# it stays well under the quarter the co-batch gate allows, as the prompt's share does.
COMPILE_SHARE = 0.15
GREEDY_BELOW = 1e-6  # temperatures under this sample greedily


@dataclass(frozen=True)
class SamplingParams:
    """How a token is drawn from the masked logits. `temperature == 0` (or below
    `GREEDY_BELOW`) means greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        t = _number("temperature", self.temperature)
        if not 0.0 <= t <= 2.0:
            raise RequestError(f"temperature must be between 0 and 2, got {self.temperature}", param="temperature")
        p = _number("top_p", self.top_p)
        if not 0.0 < p <= 1.0:
            raise RequestError(f"top_p must be in (0, 1], got {self.top_p}", param="top_p")
        if _integer("top_k", self.top_k) < 0:
            raise RequestError(f"top_k must be >= 0, got {self.top_k}", param="top_k")
        m = _number("min_p", self.min_p)
        if not 0.0 <= m < 1.0:
            raise RequestError(f"min_p must be in [0, 1), got {self.min_p}", param="min_p")
        if self.seed is not None and not 0 <= _integer("seed", self.seed) < 2**64:
            raise RequestError(f"seed must be an integer from 0 to 2^64-1, got {self.seed}", param="seed")
        # A temperature this small is greedy in all but name, and dividing logits by it
        # overflows float32: it samples greedily.
        object.__setattr__(self, "temperature", 0.0 if t < GREEDY_BELOW else t)
        object.__setattr__(self, "top_p", p)
        object.__setattr__(self, "min_p", m)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


# Whitespace allowed between JSON tokens when a request sets none: one character, so the
# output may be laid out as `json.dumps` does by default (`{"a": 1, "b": 2}`), the layout models
# most often choose; more (pretty-printing) is opt-in, since every optional character breaks a
# forced span and adds automaton states. How this was chosen: docs/json-schema.md#whitespace.
DEFAULT_MAX_WHITESPACE = 1


@dataclass(frozen=True)
class ConstraintSpec:
    """What the output must match: a regex, a JSON Schema, a grammar (`gbnf`: llama.cpp's GBNF,
    the option `grammar`; `lark`: the Lark subset llguidance reads), or a structure spec
    (`onyx.grammar.structure`; schemas and structures are kept as their JSON text, so that equal
    ones given as a dict or as a string are one cache key), with up to `max_whitespace` whitespace
    characters wherever JSON allows them (0: compact; default `DEFAULT_MAX_WHITESPACE`). `source` names the request field a
    structure was built from (`tools`, ...), for errors."""

    regex: str | None = None
    json_schema: str | None = None
    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    structure: str | None = None
    source: str | None = None
    gbnf: str | None = None
    lark: str | None = None

    @classmethod
    def parse(cls, regex: Any = None, json_schema: Any = None, max_whitespace: Any = None,
              structure: Any = None, grammar: Any = None, lark: Any = None) -> "ConstraintSpec | None":
        """The spec for these arguments (`grammar` is GBNF text), or None when none of them is
        given."""
        given = [name for name, x in (("regex", regex), ("json_schema", json_schema), ("grammar", grammar),
                                      ("lark", lark), ("structure", structure)) if x is not None]
        if len(given) > 1:
            raise RequestError(f"give either regex or json_schema (or grammar, lark or a structure), not several: "
                               f"got {' and '.join(given)}", param=given[0])
        if structure is not None:
            return cls.of_structure(structure)
        for name, text, spec in (("grammar", grammar, "gbnf"), ("lark", lark, "lark")):
            if text is not None:
                if not isinstance(text, str) or not text.strip():
                    raise RequestError(f"{name} must be a non-empty string of grammar text", param=name)
                return cls(**{spec: text})
        ws = DEFAULT_MAX_WHITESPACE if max_whitespace is None else _integer("max_whitespace", max_whitespace)
        if not 0 <= ws <= 64:
            raise RequestError(f"max_whitespace must be from 0 to 64, got {ws}", param="max_whitespace")
        if regex is not None:
            if not isinstance(regex, str):
                raise RequestError(f"regex must be a string, not {type(regex).__name__}", param="regex")
            return cls(regex=regex, max_whitespace=ws)
        if json_schema is None:
            return None
        if isinstance(json_schema, str):
            text = json_schema
        else:
            try:
                text = json.dumps(json_schema, sort_keys=False, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise InvalidSchemaError(f"invalid JSON Schema at #: not JSON-serialisable: {e}") from None
        return cls(json_schema=text, max_whitespace=ws)

    @classmethod
    def of_structure(cls, spec: Any, source: str | None = None) -> "ConstraintSpec":
        """A structure spec (JSON-able data, or its JSON text)."""
        if isinstance(spec, str) and source is None:
            text = spec
        else:
            try:
                text = json.dumps(spec, allow_nan=False, ensure_ascii=False)
            except (TypeError, ValueError) as e:
                raise RequestError(f"structure is not JSON-serialisable: {e}", param=source or "structure") from None
        return cls(structure=text, source=source)

    @property
    def key(self) -> tuple:
        """The compile cache's key: equal keys compile to the same grammar."""
        if self.regex is not None:
            return ("regex", self.regex)
        if self.structure is not None:
            return ("structure", self.structure)
        if self.gbnf is not None:
            return ("gbnf", self.gbnf)
        if self.lark is not None:
            return ("lark", self.lark)
        return ("schema", self.json_schema, self.max_whitespace)

    @property
    def param(self) -> str:
        """The request field a grammar error points at."""
        if self.source is not None:
            return self.source
        if self.structure is not None:
            return "structure"
        if self.gbnf is not None:
            return "grammar"
        if self.lark is not None:
            return "lark"
        return "regex" if self.regex is not None else "json_schema"


@dataclass(frozen=True)
class Speculation:
    """How the decoding loop drafts. `baseline` never drafts (γ = 0); `blind` drafts ignore the
    grammar; `aware` drafts are constrained by it and may use grammar-forced spans
    (`jump_forward`). `num_draft_tokens` is γ, or "auto" (adaptive)."""

    mode: str = "aware"
    num_draft_tokens: int | str = "auto"
    jump_forward: bool = True

    def __post_init__(self) -> None:
        _choice("speculative", self.mode, SPECULATIVE_MODES)
        g = self.num_draft_tokens
        if g != "auto" and (isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= MAX_DRAFT_TOKENS):
            raise RequestError(f"num_draft_tokens must be an integer from 0 to {MAX_DRAFT_TOKENS} or 'auto', "
                               f"got {g!r}", param="num_draft_tokens")
        _boolean("jump_forward", self.jump_forward)

    @property
    def drafting(self) -> bool:
        return self.mode != "baseline"


@dataclass(frozen=True)
class LogitAdjustments:
    """Changes to the logits before the grammar mask: `logit_bias` (token id -> bias from -100 to
    100, added), `presence_penalty` (subtracted once from every token already generated) and
    `frequency_penalty` (subtracted once per time it was generated), both from -2 to 2."""

    logit_bias: tuple[tuple[int, float], ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    @classmethod
    def parse(cls, logit_bias: Any = None, presence_penalty: Any = None,
              frequency_penalty: Any = None) -> "LogitAdjustments":
        bias: dict[int, float] = {}
        if logit_bias is not None:
            if not isinstance(logit_bias, dict):
                raise RequestError("logit_bias must map token ids to numbers", param="logit_bias")
            for k, v in logit_bias.items():
                try:
                    t = int(k)
                except (TypeError, ValueError):
                    raise RequestError(f"logit_bias keys are token ids, got {k!r}", param="logit_bias") from None
                if isinstance(k, bool) or t < 0:
                    raise RequestError(f"logit_bias keys are token ids, got {k!r}", param="logit_bias")
                b = _number("logit_bias", v)
                if not -100.0 <= b <= 100.0:
                    raise RequestError(f"logit_bias values must be from -100 to 100, got {v!r}", param="logit_bias")
                bias[t] = b
        out = {}
        for name, value in (("presence_penalty", presence_penalty), ("frequency_penalty", frequency_penalty)):
            x = 0.0 if value is None else _number(name, value)
            if not -2.0 <= x <= 2.0:
                raise RequestError(f"{name} must be from -2 to 2, got {value!r}", param=name)
            out[name] = x
        return cls(tuple(sorted(bias.items())), **out)

    @property
    def active(self) -> bool:
        return bool(self.logit_bias) or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_EMPTY_OBJECT = {"type": "object", "properties": {}}
CUSTOM_SYNTAXES = ("lark", "regex")
CUSTOM_INPUT = "input"  # the one string argument a custom tool is shown to chat templates with


@dataclass(frozen=True)
class CustomFormat:
    """What an OpenAI custom tool's input is: free text (`syntax` "text"), or a sentence of a
    grammar (`syntax` "lark" or "regex", the grammar in `definition`)."""

    syntax: str = "text"
    definition: str = ""


@dataclass(frozen=True)
class Function:
    """A tool: a function whose arguments follow `parameters`, or (with `custom`) an OpenAI custom
    tool, whose input is one string. Chat templates only know functions with JSON arguments, so a
    custom tool is shown as a function of one string argument (`input`), its format described in
    the function's description."""

    name: str
    description: str = ""
    parameters: dict = field(default_factory=lambda: dict(_EMPTY_OBJECT))
    strict: bool = False
    custom: CustomFormat | None = None

    @property
    def kind(self) -> str:
        """The OpenAI tool type: `function` or `custom`."""
        return "function" if self.custom is None else "custom"

    def openai(self) -> dict:
        """As an OpenAI function tool (what templates and the system description show)."""
        fn: dict = {"name": self.name}
        if self.description:
            fn["description"] = self.description
        fn["parameters"] = self.parameters
        return {"type": "function", "function": fn}


@dataclass(frozen=True)
class ToolChoice:
    mode: str  # "none", "auto", "required" or "function" (one named tool, of either kind)
    name: str | None = None
    allowed: tuple[str, ...] | None = None  # `allowed_tools`: the names the answer may call


def parse_tools(tools: list | None) -> list[Function]:
    """The request's `tools` (function and custom tools), checked."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("tools must be a list of {type: 'function', function: {...}} or "
                           "{type: 'custom', custom: {...}} objects", param="tools")
    out: list[Function] = []
    for i, t in enumerate(tools):
        where = f"tools.{i}"
        kind = t.get("type", "function") if isinstance(t, dict) else None
        if kind not in ("function", "custom") or not isinstance(t.get(kind), dict):
            raise RequestError("each tool must be {type: 'function', function: {name, ...}} or "
                               "{type: 'custom', custom: {name, ...}}", param=where)
        spec = t[kind]
        where = f"{where}.{kind}"
        name = spec.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise RequestError("a tool name is 1 to 64 letters, digits, '_' or '-'", param=f"{where}.name")
        if any(f.name == name for f in out):
            raise RequestError(f"tool {name!r} is defined twice", param=f"{where}.name")
        desc = spec.get("description") or ""
        if not isinstance(desc, str):
            raise RequestError("description must be a string", param=f"{where}.description")
        if kind == "custom":
            out.append(_custom_tool(name, desc, spec.get("format"), where))
            continue
        params = spec.get("parameters", _EMPTY_OBJECT)
        if not isinstance(params, dict):
            raise RequestError("parameters must be a JSON Schema object", param=f"{where}.parameters")
        out.append(Function(name, desc, params, bool(spec.get("strict", False))))
    return out


def _custom_tool(name: str, description: str, fmt: Any, where: str) -> Function:
    """A custom tool as a `Function` of one string argument, its format said in the description."""
    where = f"{where}.format"
    if fmt is None:
        fmt = {"type": "text"}
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "grammar"):
        raise RequestError("format must be {type: 'text'} or {type: 'grammar', grammar: {syntax, definition}}",
                           param=f"{where}.type" if isinstance(fmt, dict) else where)
    custom = CustomFormat()
    if fmt["type"] == "grammar":
        grammar = fmt.get("grammar")
        if not isinstance(grammar, dict):
            raise RequestError("a grammar format needs grammar: {syntax, definition}", param=f"{where}.grammar")
        syntax, definition = grammar.get("syntax"), grammar.get("definition")
        if syntax not in CUSTOM_SYNTAXES:
            raise RequestError(f"grammar.syntax must be 'lark' or 'regex', got {syntax!r}",
                               param=f"{where}.grammar.syntax")
        if not isinstance(definition, str) or not definition.strip():
            raise RequestError("grammar.definition must be a non-empty string", param=f"{where}.grammar.definition")
        custom = CustomFormat(syntax, definition)
    return Function(name, _custom_description(description, custom), _custom_parameters(custom), custom=custom)


def _custom_description(description: str, custom: CustomFormat) -> str:
    if custom.syntax == "text":
        said = f"Its `{CUSTOM_INPUT}` argument is free text."
    elif custom.syntax == "lark":
        said = f"Its `{CUSTOM_INPUT}` argument is text in this Lark grammar:\n{custom.definition}"
    else:
        said = f"Its `{CUSTOM_INPUT}` argument is text that fully matches this regular expression: {custom.definition}"
    return f"{description}\n\n{said}" if description else said


def _custom_parameters(custom: CustomFormat) -> dict:
    what = "free text" if custom.syntax == "text" else f"text in the {custom.syntax} format of the description"
    return {"type": "object", "properties": {CUSTOM_INPUT: {"type": "string", "description": what}},
            "required": [CUSTOM_INPUT], "additionalProperties": False}


def parse_tool_choice(choice, functions: list[Function]) -> ToolChoice:
    """The request's `tool_choice` (default `auto` with tools, `none` without): a mode, a named
    function or custom tool, or `allowed_tools` (a mode over some of the tools)."""
    if choice is None:
        return ToolChoice("auto" if functions else "none")
    if choice in ("none", "auto", "required"):
        if choice == "required" and not functions:
            raise RequestError("tool_choice 'required' needs tools", param="tool_choice")
        return ToolChoice(choice)
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return _allowed_tools(choice.get("allowed_tools"), functions)
    if isinstance(choice, dict) and choice.get("type", "function") in ("function", "custom"):
        return ToolChoice("function", _named_tool(choice, functions, "tool_choice"))
    raise RequestError("tool_choice must be 'none', 'auto', 'required', {type: 'function', function: {name}}, "
                       "{type: 'custom', custom: {name}} or {type: 'allowed_tools', allowed_tools: {mode, tools}}",
                       param="tool_choice")


def _named_tool(ref: Any, functions: list[Function], param: str) -> str:
    """The name of the tool `ref` ({type, function|custom: {name}}) names, of that type."""
    kind = ref.get("type", "function") if isinstance(ref, dict) else None
    inner = ref.get(kind) if kind in ("function", "custom") else None
    name = inner.get("name") if isinstance(inner, dict) else None
    if not any(f.name == name and f.kind == kind for f in functions):
        raise RequestError(f"{param} names the {kind or 'tool'} {name!r}, which is not in tools", param=param)
    return name


def _allowed_tools(allowed: Any, functions: list[Function]) -> ToolChoice:
    param = "tool_choice.allowed_tools"
    if not isinstance(allowed, dict) or allowed.get("mode") not in ("auto", "required"):
        raise RequestError("allowed_tools must be {mode: 'auto' | 'required', tools: [...]}", param=f"{param}.mode")
    refs = allowed.get("tools")
    if not isinstance(refs, list) or not refs:
        raise RequestError("allowed_tools.tools must be a non-empty list of tools", param=f"{param}.tools")
    names = tuple(_named_tool(r, functions, f"{param}.tools.{j}") for j, r in enumerate(refs))
    return ToolChoice(allowed["mode"], allowed=names)


@dataclass(frozen=True)
class ToolOptions:
    """A chat request's tools (`Function`s), its `tool_choice` and whether several
    calls may come in one answer."""

    functions: tuple[Function, ...] = ()
    choice: ToolChoice = ToolChoice("none")
    parallel: bool = True

    @classmethod
    def parse(cls, tools: Any = None, tool_choice: Any = None,
              parallel_tool_calls: Any = None) -> "ToolOptions | None":
        """None when the request has no tools and no tool_choice."""
        if tools is None and tool_choice is None and parallel_tool_calls is None:
            return None
        functions = parse_tools(tools)
        choice = parse_tool_choice(tool_choice, functions)
        parallel = True if parallel_tool_calls is None else _boolean("parallel_tool_calls", parallel_tool_calls)
        return cls(tuple(functions), choice, parallel)

    @property
    def calling(self) -> bool:
        """The model may (or must) call a tool."""
        return bool(self.functions) and self.choice.mode != "none"


@dataclass(frozen=True)
class GenerateOptions:
    """Every option of one generation (see the module docstring)."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    sampling: SamplingParams = field(default_factory=SamplingParams)
    constraint: ConstraintSpec | None = None
    stop: tuple[str, ...] = ()
    speculation: Speculation = field(default_factory=Speculation)
    phi: str = "none"
    n: int = 1
    adjust: LogitAdjustments = field(default_factory=LogitAdjustments)
    tools: ToolOptions | None = None
    logprobs: int | None = None  # None: no logprobs; k: each token's entry lists k alternatives
    max_reasoning_tokens: int | None = None
    reasoning_effort: str | None = None  # OpenAI's, read as a bound on thinking (REASONING_EFFORT)
    prediction: str | None = None  # text the output is expected to repeat: a source of drafts

    # The keyword arguments `parse` takes (the Python API's and the server's names).
    FIELDS = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "regex", "json_schema",
              "grammar", "lark", "structure", "max_whitespace", "stop", "speculative", "num_draft_tokens", "jump_forward", "phi",
              "n", "logit_bias", "presence_penalty", "frequency_penalty", "tools", "tool_choice",
              "parallel_tool_calls", "logprobs", "top_logprobs", "max_reasoning_tokens", "reasoning_effort",
              "prediction")

    def __post_init__(self) -> None:
        if _integer("max_tokens", self.max_tokens) < 1:
            raise RequestError(f"max_tokens must be a positive integer, got {self.max_tokens!r}", param="max_tokens")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) and s for s in self.stop):
            raise RequestError("stop must be a non-empty string or a list of them", param="stop")
        if not 1 <= _integer("n", self.n) <= MAX_SAMPLES:
            raise RequestError(f"n must be an integer from 1 to {MAX_SAMPLES}, got {self.n!r}", param="n")
        _choice("phi", self.phi, PHI_KINDS)
        if self.phi != "none" and self.constraint is None:
            raise RequestError("phi reweighting needs a constraint (regex, json_schema, grammar)", param="phi")
        if self.logprobs is not None and not 0 <= _integer("top_logprobs", self.logprobs) <= MAX_TOP_LOGPROBS:
            raise RequestError(f"top_logprobs must be from 0 to {MAX_TOP_LOGPROBS}, got {self.logprobs!r}",
                               param="top_logprobs")
        if self.max_reasoning_tokens is not None and _integer("max_reasoning_tokens", self.max_reasoning_tokens) < 1:
            raise RequestError(f"max_reasoning_tokens must be a positive integer, got {self.max_reasoning_tokens!r}",
                               param="max_reasoning_tokens")
        if self.reasoning_effort is not None:
            _choice("reasoning_effort", self.reasoning_effort, tuple(REASONING_EFFORT))
        if self.prediction is not None and not isinstance(self.prediction, str):
            raise RequestError("prediction must be text", param="prediction")

    @property
    def reasoning_budget(self) -> int | None:
        """The thinking block's bound in tokens: `max_reasoning_tokens`, else what
        `reasoning_effort` maps to (None: unbounded)."""
        if self.max_reasoning_tokens is not None:
            return self.max_reasoning_tokens
        return REASONING_EFFORT.get(self.reasoning_effort) if self.reasoning_effort is not None else None

    @classmethod
    def parse(cls, **kwargs: Any) -> "GenerateOptions":
        """Options from keyword arguments; a None value means "the default"."""
        unknown = sorted(set(kwargs) - set(cls.FIELDS))
        if unknown:
            raise RequestError(f"unknown option(s): {', '.join(unknown)}", param=unknown[0])
        given = {k: v for k, v in kwargs.items() if v is not None}
        sampling = SamplingParams(**{k: given[k] for k in ("temperature", "top_p", "top_k", "min_p", "seed")
                                     if k in given})
        speculation = Speculation(**{name: given[k] for k, name in (("speculative", "mode"),
                                                                   ("num_draft_tokens", "num_draft_tokens"),
                                                                   ("jump_forward", "jump_forward"))
                                     if k in given})
        return cls(max_tokens=given.get("max_tokens", DEFAULT_MAX_TOKENS), sampling=sampling,
                   constraint=ConstraintSpec.parse(given.get("regex"), given.get("json_schema"),
                                                   given.get("max_whitespace"), given.get("structure"),
                                                   given.get("grammar"), given.get("lark")),
                   stop=_stop_strings(given.get("stop", ())), speculation=speculation,
                   phi=given.get("phi", "none"), n=given.get("n", 1),
                   adjust=LogitAdjustments.parse(given.get("logit_bias"), given.get("presence_penalty"),
                                                 given.get("frequency_penalty")),
                   tools=ToolOptions.parse(given.get("tools"), given.get("tool_choice"),
                                           given.get("parallel_tool_calls")),
                   logprobs=_logprobs(given.get("logprobs"), given.get("top_logprobs")),
                   max_reasoning_tokens=given.get("max_reasoning_tokens"),
                   reasoning_effort=given.get("reasoning_effort"), prediction=_prediction(given.get("prediction")))

    def updated(self, **kwargs: Any) -> "GenerateOptions":
        """A copy with some top-level fields replaced (validated again)."""
        return replace(self, **kwargs)


def _logprobs(logprobs: Any, top_logprobs: Any) -> int | None:
    """`logprobs` (true/false) and `top_logprobs` (how many alternatives) as one value: None
    when off, else the number of alternatives."""
    on = False if logprobs is None else _boolean("logprobs", logprobs)
    if top_logprobs is not None:
        k = _integer("top_logprobs", top_logprobs)
        if not on:
            raise RequestError("top_logprobs needs logprobs=true", param="top_logprobs")
        return k
    return 0 if on else None


def _prediction(prediction: Any) -> str | None:
    """OpenAI's predicted output: text, or `{"type": "content", "content": text or text parts}`."""
    if prediction is None or isinstance(prediction, str):
        return prediction
    content = prediction.get("content") if isinstance(prediction, dict) and prediction.get("type") == "content" else None
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        content = "".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise RequestError("prediction must be {type: 'content', content: text or a list of text parts}",
                           param="prediction")
    return content


def _stop_strings(stop: Any) -> tuple[str, ...]:
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop must be a non-empty string or a list of them", param="stop")
    return tuple(stop)
