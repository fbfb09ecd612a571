"""One assistant output, as it streams, into OpenAI's message parts: `reasoning_content`,
`content` and `tool_calls`.

The thinking block comes first (`onyx.chat.reasoning.ReasoningParser`), and what follows it is read
for tool calls (`onyx.chat.tool_parser.ToolCallParser`). Either part may be absent: without a
thinking format everything is the answer, without a tool format the answer is all content.

    parser = OutputParser(thinking=fmt, tools=plan.format)
    for piece in generated_text_pieces:          # special tokens written as their text
        for delta in parser.feed(piece):         # {"reasoning_content": …} / {"content": …} / {"tool_calls": […]}
            send(delta)
    for delta in parser.finish():
        send(delta)
    message = parser.result.message()            # the same, whole
"""

from __future__ import annotations

from typing import Callable

from onyx.chat.reasoning import ReasoningParser, ThinkingFormat
from onyx.chat.tool_formats import ToolFormat
from onyx.chat.tool_parser import ParsedMessage, ToolCallParser, new_call_id


class OutputParser:
    def __init__(self, thinking: ThinkingFormat | None = None, tools: ToolFormat | None = None, *,
                 new_id: Callable[[], str] = new_call_id, custom: frozenset[str] = frozenset(),
                 answer_closes: bool = False) -> None:
        self.answer_closes = answer_closes  # the answer is a constrained value (not free text)
        self._reasoning = ReasoningParser(thinking)
        self._tools = ToolCallParser(tools, new_id=new_id, custom=custom) if tools is not None else None
        self._plain = ParsedMessage()

    def feed(self, text: str) -> list[dict]:
        return self._route(self._reasoning.feed(text), final=False)

    def finish(self) -> list[dict]:
        return self._route(self._reasoning.finish(), final=True)

    @property
    def result(self) -> ParsedMessage:
        r = self._tools.result if self._tools is not None else self._plain
        r.reasoning_content = self._reasoning.reasoning if self._reasoning.thinking else None
        return r

    @property
    def closed(self) -> bool:
        """Read at an accepting state of the constraint: the answer is closed (complete calls, or
        a constrained value such as JSON), not free text that was still running."""
        r = self.result
        return self.answer_closes or (bool(r.tool_calls) and not r.incomplete)

    def _route(self, deltas: list[dict], final: bool) -> list[dict]:
        out: list[dict] = []
        for d in deltas:
            if "content" in d and self._tools is not None:
                out += self._tools.feed(d["content"])
            else:
                if "content" in d:
                    self._plain.content += d["content"]
                out.append(d)
        if final and self._tools is not None:
            out += self._tools.finish()
        return out


def parse(text: str, thinking: ThinkingFormat | None = None, tools: ToolFormat | None = None, *,
          new_id: Callable[[], str] = new_call_id, custom: frozenset[str] = frozenset()) -> ParsedMessage:
    """The reasoning, content and tool calls of a finished output (`custom`: the names of custom
    tools, whose calls come back as `custom.input`)."""
    p = OutputParser(thinking, tools, new_id=new_id, custom=custom)
    p.feed(text)
    p.finish()
    return p.result
