"""What a caller gets back: a finished generation (`Result`) and the pieces of a streamed one
(`Chunk`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Result:
    """A finished generation. `text` is the whole output (a tool call's or a thinking block's
    markup included); a chat answer read by an output parser also has it apart: `content`,
    `tool_calls` (OpenAI's shape) and `reasoning_content`."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop", "length" or "tool_calls" ("cancelled" when the caller stopped it)
    valid: bool | None  # does the text match the constraint? None when unconstrained
    stats: dict = field(default_factory=dict)
    content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)
    reasoning_content: str | None = None
    logprobs: list[dict] | None = None  # one entry per token of `token_ids` (`onyx.decoding.logprobs`)
    stop_string: str | None = None  # the stop string that ended the text, if one did

    def message(self) -> dict:
        """As an OpenAI assistant message."""
        msg: dict = {"role": "assistant", "content": self.content if self.content or not self.tool_calls else None}
        if self.reasoning_content is not None:
            msg["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


@dataclass
class Chunk:
    """A piece of a streamed generation. The last chunk of a sample has `finish_reason` and
    `result` set; `index` is the sample's (0 unless the request asked for n > 1). `deltas` are
    the piece read by the output parser, shaped like OpenAI's `choices[].delta`
    (`{"content": …}`, `{"reasoning_content": …}`, `{"tool_calls": [...]}`); without a parser,
    one content delta of `text`. `logprobs` has an entry per token of the piece."""

    text: str
    token_ids: list[int]
    finish_reason: str | None = None
    result: Result | None = None
    index: int = 0
    deltas: list[dict] = field(default_factory=list)
    logprobs: list[dict] | None = None


def cancelled(index: int) -> Chunk:
    """The one chunk of a sample that was cancelled before it ran."""
    return Chunk("", [], "cancelled", Result("", [], "cancelled", None, {"queue_s": None}), index)
