"""Tool calls out of generated text, incrementally: OpenAI-style deltas while streaming, and the
same calls whole at the end.

`ToolCallParser(fmt)` reads text as it is generated (special tokens written as their text) and
turns it into deltas shaped like OpenAI's `choices[0].delta`:

    {"content": "Let me check."}
    {"tool_calls": [{"index": 0, "id": "call_…", "type": "function",
                     "function": {"name": "get_weather", "arguments": ""}}]}
    {"tool_calls": [{"index": 0, "function": {"arguments": "{\\"city\\": "}}]}

Index, id and name come first, once the name is complete; then the arguments as they are
written, byte for byte (FunctionGemma's non-JSON arguments come as one JSON fragment when the
call closes). A call of a custom tool (a name in `custom`) is written as a function call with
`{"input": "..."}` and read back as OpenAI's custom call, the string decoded as it streams:

    {"tool_calls": [{"index": 0, "id": "call_…", "type": "custom",
                     "custom": {"name": "apply_patch", "input": ""}}]}
    {"tool_calls": [{"index": 0, "custom": {"input": "*** Begin Patch\n"}}]}

The parser only ever appends, and `parse` is `feed(everything)` then `finish()`, so streamed
deltas reassemble to exactly the parsed message whatever the chunking.

Text that leaves the format (an unconstrained model) is content: before a call's name is
complete the parser backs out and keeps the text; after it, a call whose arguments never close
stays as written (`incomplete`), as a length-cut output would.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Callable

from onyx.chat.tool_formats import ToolFormat
from onyx.options import CUSTOM_INPUT

_NAME_CHAR = re.compile(r"[A-Za-z0-9_.\-]")


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


@dataclass
class ParsedMessage:
    """An assistant message: its text and its calls in OpenAI's shape."""

    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    incomplete: bool = False  # the last call's arguments never closed (a cut-off output)
    reasoning_content: str | None = None

    def message(self) -> dict:
        """As an OpenAI chat message (`content` is null when there is only tool calls)."""
        msg: dict = {"role": "assistant", "content": self.content or (None if self.tool_calls else "")}
        if self.reasoning_content is not None:
            msg["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg

    @property
    def finish_reason(self) -> str | None:
        """`tool_calls` when the message calls tools; else None (the generation's own reason)."""
        return "tool_calls" if self.tool_calls and not self.incomplete else None


class _Json:
    """Where a JSON value ends, read one character at a time."""

    def __init__(self) -> None:
        self.depth = 0
        self.started = False
        self.in_string = False
        self.escaped = False
        self.primitive = False

    def push(self, c: str) -> bool | None:
        """Takes one character: True once the value is complete with it, False when `c` is not
        part of the value (only after a bare primitive), else None."""
        if not self.started:
            if c.isspace():
                return None
            self.started = True
            if c in "{[":
                self.depth = 1
            elif c == '"':
                self.in_string = True
            else:
                self.primitive = True
            return None
        if self.primitive:
            return None if re.match(r"[\w.+\-]", c) else False
        if self.in_string:
            if self.escaped:
                self.escaped = False
            elif c == "\\":
                self.escaped = True
            elif c == '"':
                self.in_string = False
                return True if self.depth == 0 else None
            return None
        if c == '"':
            self.in_string = True
        elif c in "{[":
            self.depth += 1
        elif c in "}]":
            self.depth -= 1
            if self.depth == 0:
                return True
        return None


_INPUT_OPEN = re.compile(r'\s*\{\s*"' + CUSTOM_INPUT + r'"\s*:\s*"')
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")


class _InputReader:
    """A custom call's input out of its arguments text `{"input": "..."}`, decoded as the text
    arrives: `push` returns the newly decoded part of the string. Arguments that are not of that
    shape (an unconstrained model) are the input as written."""

    def __init__(self) -> None:
        self.state = "open"  # open: before the string; string: inside it; raw: not that shape; done
        self.held = ""  # text not decoded yet: the opening so far, or an escape cut short

    def push(self, text: str) -> str:
        if self.state == "raw":
            return text
        if self.state == "done":
            return ""
        out = []
        self.held += text
        if self.state == "open":
            m = _INPUT_OPEN.match(self.held)
            if m is None:
                if _could_open(self.held):
                    return ""
                self.state = "raw"
                held, self.held = self.held, ""
                return held
            self.held = self.held[m.end():]
            self.state = "string"
        text, self.held = self.held, ""
        i = 0
        while i < len(text):
            c = text[i]
            if c == '"':
                self.state = "done"
                break
            if c != "\\":
                out.append(c)
                i += 1
                continue
            n = _escape_length(text, i)
            if n is None:  # cut short: wait for the rest
                self.held = text[i:]
                break
            try:
                out.append(json.loads('"' + text[i:i + n] + '"'))
            except ValueError:  # not a JSON escape (unconstrained text): kept as written
                out.append(text[i:i + n])
            i += n
        return "".join(out)


def _could_open(text: str) -> bool:
    """True while `text` may still grow into the opening `{"input": "`."""
    probe = re.sub(r"\s+", "", text)
    return ('{"' + CUSTOM_INPUT + '":"').startswith(probe)


def _escape_length(text: str, i: int) -> int | None:
    """The length of the escape at `text[i]` (a backslash), a surrogate pair as one; None when
    the text ends inside it."""
    if i + 1 >= len(text):
        return None
    if text[i + 1] != "u":
        return 2
    if i + 6 > len(text):
        return None
    if _HIGH_SURROGATE.match(text[i:i + 6]):
        if i + 12 <= len(text):
            return 12 if text[i + 6:i + 8] == "\\u" else 6
        return None if text[i + 6:i + 8] in ("", "\\", "\\u") else 6
    return 6


class ToolCallParser:
    """Incremental parser of one assistant output in format `fmt`; calls of the tools named in
    `custom` are custom tool calls."""

    def __init__(self, fmt: ToolFormat, *, new_id: Callable[[], str] = new_call_id,
                 custom: frozenset[str] = frozenset()) -> None:
        self.fmt = fmt
        self.new_id = new_id
        self.custom = custom
        self._input: _InputReader | None = None
        self.result = ParsedMessage()
        self._buf = ""
        self._state = "start" if fmt.trigger is None else "text"
        self._raw = ""  # consumed since the section opened, while no call header is out
        self._name = ""
        self._args: _Json | None = None
        self._gemma_args = ""
        self._out: list[dict] = []

    # -- public ---------------------------------------------------------------------------

    def feed(self, text: str) -> list[dict]:
        self._buf += text
        self._run(final=False)
        return self._take()

    def finish(self) -> list[dict]:
        # A call cut off inside its closing text is complete: drop the partial format text.
        fmt = self.fmt
        if self._state == "call_close" and fmt.call_close.startswith(self._buf):
            self._buf = ""
        if self._state == "next" and any(lit and lit.startswith(self._buf) for lit in
                                         (fmt.separator + fmt.call_open, fmt.section_close)):
            self._buf = ""
        if self._cut_in_header():
            # A call cut off before its name was out (a length-cut output): its markup is not
            # the answer's text, and there is no call to report.
            self._buf = self._raw = ""
            self.result.incomplete = True
            self._state = "done"
            return self._take()
        self._run(final=True)
        if self._state in ("open", "name", "name_close"):
            self._content(self._raw + self._buf)
        elif self._state == "args":
            self.result.incomplete = True
        elif self._state in ("text", "start", "tail"):
            self._content(self._buf)
        self._buf = ""
        self._state = "done"
        return self._take()

    def parse(self, text: str) -> ParsedMessage:
        """The whole output at once (the same as feeding it and finishing)."""
        self.feed(text)
        self.finish()
        return self.result

    # -- machinery -------------------------------------------------------------------------

    def _cut_in_header(self) -> bool:
        """The text ends inside a call's opening (before its name is complete), everything since
        the section opened still on the way to a call header."""
        fmt, buf = self.fmt, self._buf
        if self._state == "open":
            return fmt.opener.startswith(buf)
        if self._state == "name":
            return all(_NAME_CHAR.match(c) for c in buf)
        if self._state == "name_close":
            return fmt.name_close.startswith(buf)
        if self._state == "start":
            body = buf.lstrip()
            return bool(body) and fmt.opener.startswith(body) and body != fmt.opener
        return False

    def _take(self) -> list[dict]:
        out, self._out = self._out, []
        return out

    def _content(self, s: str) -> None:
        if s:
            self.result.content += s
            if self._out and "content" in self._out[-1]:
                self._out[-1]["content"] += s
            else:
                self._out.append({"content": s})

    def _expect(self, lit: str, final: bool) -> bool | None:
        """Consumes `lit` if the buffer starts with it: True; None while the buffer is a proper
        prefix of it (wait for more); False when it cannot match."""
        if self._buf.startswith(lit):
            self._buf = self._buf[len(lit):]
            self._raw += lit
            return True
        if lit.startswith(self._buf) and not final:
            return None
        return False

    def _back_out(self) -> None:
        """The section was not a call after all: its first character is text, and the search
        for a trigger goes on after it."""
        self._buf = self._raw + self._buf
        self._content(self._buf[0])
        self._buf = self._buf[1:]
        self._raw = ""
        self._state = "text" if self.fmt.trigger is not None else "tail"

    def _run(self, final: bool) -> None:
        fmt = self.fmt
        while True:
            s = self._state
            if s == "start":  # no trigger: the whole answer is calls, or text
                body = self._buf.lstrip()
                if body.startswith(fmt.opener):
                    self._buf = body
                    self._raw = ""
                    self._state = "open"
                elif not final and fmt.opener.startswith(body):
                    return
                else:
                    self._state = "tail"
            elif s == "text":
                at = self._buf.find(fmt.trigger)
                if at < 0:
                    keep = 0 if final else _held_back(self._buf, fmt.trigger)
                    self._content(self._buf[:len(self._buf) - keep])
                    self._buf = self._buf[len(self._buf) - keep:]
                    return
                self._content(self._buf[:at])
                self._buf = self._buf[at:]
                self._raw = ""
                self._state = "open"
            elif s == "open":
                got = self._expect(fmt.opener, final)
                if got is None:
                    return
                if not got:
                    self._back_out()
                    continue
                self._name = ""
                self._state = "name"
            elif s == "name":
                i = 0
                while i < len(self._buf) and _NAME_CHAR.match(self._buf[i]):
                    i += 1
                self._name += self._buf[:i]
                self._raw += self._buf[:i]
                self._buf = self._buf[i:]
                if not self._buf and not final:
                    return
                if not self._name:
                    self._back_out()
                    continue
                self._state = "name_close"
            elif s == "name_close":
                got = self._expect(fmt.name_close, final)
                if got is None:
                    return
                if not got:
                    self._back_out()
                    continue
                self._header()
                self._state = "args"
            elif s == "args":
                if not self._arguments():
                    return
                self._state = "call_close"
            elif s == "call_close":
                got = self._expect(fmt.call_close, final)
                if got is None:
                    return
                self._state = "next" if got else "after"
            elif s == "next":
                nxt = self._expect(fmt.separator + fmt.call_open, final)
                if nxt:
                    self._name = ""
                    self._state = "name"
                    continue
                if nxt is None:
                    return
                close = self._expect(fmt.section_close, final) if fmt.section_close else False
                if close is None:
                    return
                self._state = "after"
            elif s == "after":  # after a section: text again (where a trigger may open another)
                self._raw = ""
                self._state = "text" if fmt.trigger is not None else "tail"
            elif s == "tail":
                self._content(self._buf)
                self._buf = ""
                return
            else:
                return

    def _header(self) -> None:
        index = len(self.result.tool_calls)
        kind, body = ("custom", {"name": self._name, "input": ""}) if self._name in self.custom else \
            ("function", {"name": self._name, "arguments": ""})
        call = {"id": self.new_id(), "type": kind, kind: body}
        self.result.tool_calls.append(call)
        self._out.append({"tool_calls": [{"index": index, "id": call["id"], "type": kind, kind: dict(body)}]})
        self._input = _InputReader() if kind == "custom" else None
        self._raw = ""
        self._args = _Json()
        self._gemma_args = ""

    def _arguments(self) -> bool:
        """Reads argument text; True once the arguments are complete."""
        if self.fmt.arguments == "gemma":
            from onyx.chat.gemma_calls import parse_gemma, value_end

            self._gemma_args += self._buf
            self._buf = ""
            end = value_end(self._gemma_args)
            if end is None:
                return False
            self._buf = self._gemma_args[end:]
            value = parse_gemma(self._gemma_args[:end])
            self._fragment(json.dumps(value, ensure_ascii=False))
            return True
        taken, done = 0, False
        for c in self._buf:
            verdict = self._args.push(c)
            if verdict is False:
                done = True
                break
            taken += 1
            if verdict:
                done = True
                break
        self._fragment(self._buf[:taken])
        self._buf = self._buf[taken:]
        return done

    def _fragment(self, s: str) -> None:
        if self._input is not None:
            s, key, field_ = self._input.push(s), "custom", "input"
        else:
            key, field_ = "function", "arguments"
        if not s:
            return
        index = len(self.result.tool_calls) - 1
        self.result.tool_calls[index][key][field_] += s
        self._out.append({"tool_calls": [{"index": index, key: {field_: s}}]})


def _held_back(buf: str, trigger: str) -> int:
    """Length of the longest end of `buf` that is a proper prefix of `trigger`."""
    for k in range(min(len(buf), len(trigger) - 1), 0, -1):
        if trigger.startswith(buf[-k:]):
            return k
    return 0


def parse(text: str, fmt: ToolFormat, *, new_id: Callable[[], str] = new_call_id,
          custom: frozenset[str] = frozenset()) -> ParsedMessage:
    """The content and tool calls of a finished output."""
    return ToolCallParser(fmt, new_id=new_id, custom=custom).parse(text)
