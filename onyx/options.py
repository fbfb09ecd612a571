"""The options of one generation, parsed and validated once.

`GenerateOptions` is the one typed home of every per-request option. The Python API builds it
from keyword arguments (`GenerateOptions.parse(**kwargs)`), the server from a request body, the
CLI from its flags; the engine and the decoding loop then read typed fields only. A bad value
raises `RequestError` whose `param` is the field's name, as the API spells it.

    options = GenerateOptions.parse(max_tokens=64, temperature=0.7, seed=1,
                                    json_schema={"type": "object"}, speculative="aware")
    options.sampling.temperature, options.constraint.json_schema, options.speculation.num_draft_tokens

Groups: `SamplingParams` (temperature, top-k/p, min-p, seed), `ConstraintSpec` (regex or JSON
Schema, whitespace), `Speculation` (draft mode, draft count, jump-forward), and on the top level
`max_tokens`, `stop`, `phi` and `n` (samples of the same prompt, decoded side by side in the
batch from one prefill; with a seed, sample i uses seed + i).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from onyx.errors import InvalidSchemaError, RequestError

DEFAULT_MAX_TOKENS = 256
MAX_SAMPLES = 16  # n: samples of one prompt
MAX_DRAFT_TOKENS = 32
SPECULATIVE_MODES = ("baseline", "blind", "aware")
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


@dataclass(frozen=True)
class SamplingParams:
    """How a token is drawn from the masked logits. `temperature == 0` means greedy."""

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
        object.__setattr__(self, "temperature", t)
        object.__setattr__(self, "top_p", p)
        object.__setattr__(self, "min_p", m)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class ConstraintSpec:
    """What the output must match: a regex, or a JSON Schema (kept as its JSON text, so that equal
    schemas given as a dict or as a string are one cache key), with up to `max_whitespace`
    whitespace characters wherever JSON allows them (0: compact)."""

    regex: str | None = None
    json_schema: str | None = None
    max_whitespace: int = 0

    @classmethod
    def parse(cls, regex: Any = None, json_schema: Any = None, max_whitespace: Any = None) -> "ConstraintSpec | None":
        """The spec for these arguments, or None when neither regex nor json_schema is given."""
        if regex is not None and json_schema is not None:
            raise RequestError("give either regex or json_schema, not both", param="regex")
        ws = 0 if max_whitespace is None else _integer("max_whitespace", max_whitespace)
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

    @property
    def key(self) -> tuple:
        """The compile cache's key: equal keys compile to the same grammar."""
        if self.regex is not None:
            return ("regex", self.regex)
        return ("schema", self.json_schema, self.max_whitespace)

    @property
    def param(self) -> str:
        """The request field a grammar error points at."""
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
class GenerateOptions:
    """Every option of one generation (see the module docstring)."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    sampling: SamplingParams = field(default_factory=SamplingParams)
    constraint: ConstraintSpec | None = None
    stop: tuple[str, ...] = ()
    speculation: Speculation = field(default_factory=Speculation)
    phi: str = "none"
    n: int = 1

    # The keyword arguments `parse` takes (the Python API's and the server's names).
    FIELDS = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "regex", "json_schema",
              "max_whitespace", "stop", "speculative", "num_draft_tokens", "jump_forward", "phi", "n")

    def __post_init__(self) -> None:
        if _integer("max_tokens", self.max_tokens) < 1:
            raise RequestError(f"max_tokens must be a positive integer, got {self.max_tokens!r}", param="max_tokens")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) and s for s in self.stop):
            raise RequestError("stop must be a non-empty string or a list of them", param="stop")
        if not 1 <= _integer("n", self.n) <= MAX_SAMPLES:
            raise RequestError(f"n must be an integer from 1 to {MAX_SAMPLES}, got {self.n!r}", param="n")
        _choice("phi", self.phi, PHI_KINDS)
        if self.phi != "none" and self.constraint is None:
            raise RequestError("phi reweighting needs a regex or json_schema constraint", param="phi")

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
                                                   given.get("max_whitespace")),
                   stop=_stop_strings(given.get("stop", ())), speculation=speculation,
                   phi=given.get("phi", "none"), n=given.get("n", 1))

    def updated(self, **kwargs: Any) -> "GenerateOptions":
        """A copy with some top-level fields replaced (validated again)."""
        return replace(self, **kwargs)


def _stop_strings(stop: Any) -> tuple[str, ...]:
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop must be a non-empty string or a list of them", param="stop")
    return tuple(stop)
