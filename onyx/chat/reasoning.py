"""Reasoning models: the thinking block, the constraint after it, and a budget that closes it.

A reasoning model writes `<think>…</think>` before its answer (the tags vary by family). Some
chat templates open the block in the generation prompt (DeepSeek-R1's later templates end the
prompt with `<think>\\n`), so the output starts inside it; others leave it to the model.

- `detect(template)` finds the convention from the template source and, by rendering a probe
  conversation, whether the prompt already opens the block.
- `structure(fmt, answer, vocab)` is the structure spec: free text that does not contain the
  closing tag, the tag, a little whitespace, then `answer` (a regex, a schema, a tool-call
  section: any spec), so the constraint engages only after the block closes. One DFA: with
  `max_tokens`, budget-aware masking already closes the block early enough for the answer to fit.
- `ReasoningParser` splits an output, incrementally, into `reasoning_content` and `content`
  deltas (as vLLM and DeepSeek's API name them); `split` does it for a finished output.
- `ReasoningBudget` bounds the block itself (`max_reasoning_tokens`): a small second grammar
  whose language is "the block, closed, then anything", walked in lockstep with the request's
  grammar while the block is open; its budget-aware mask, ANDed with the request's mask, keeps
  the close reachable within the reasoning tokens left, so the block closes in time (the close
  is reachable in one token from any point of free text, so the mask only bites at the end).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyx.grammar import structure as st
from onyx.chat.template import ChatTemplate, TemplateError

# Open and close tags of the thinking conventions Onyx knows, most common first.
TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<longcat_think>", "</longcat_think>"),
    ("<|think:start|>", "<|think:end|>"),
)

# Whitespace allowed between the closing tag and a constrained answer.
GAP = r"[ \t\r\n]{0,4}"

_PROBE = "onyx reasoning probe"


@dataclass(frozen=True)
class ThinkingFormat:
    open: str = "<think>"
    close: str = "</think>"
    opened_by_prompt: bool = False  # the generation prompt ends inside an open block


def detect(template: ChatTemplate, **template_kwargs) -> ThinkingFormat | None:
    """The thinking convention of a chat template, or None when it has none."""
    source = template.source or ""
    for open_, close in TAGS:
        if open_ in source or close in source:
            return ThinkingFormat(open_, close, opens_block(template, open_, close, **template_kwargs))
    return None


def opens_block(template: ChatTemplate, open_: str, close: str, **template_kwargs) -> bool:
    """Does the generation prompt leave a thinking block open? Renders a one-message
    conversation and reads what follows the message."""
    try:
        text = template.render([{"role": "user", "content": _PROBE}], **template_kwargs)
    except TemplateError:
        return False
    tail = text[text.rfind(_PROBE) + len(_PROBE):]
    at = tail.rfind(open_)
    return at >= 0 and close not in tail[at:]


def structure(fmt: ThinkingFormat, answer: st.Spec | None, vocab, *, require_thinking: bool = False) -> st.Spec:
    """The thinking block, then `answer` (free text when None). When the prompt does not open
    the block, the model may skip it, unless `require_thinking` (a `ReasoningBudget` needs the
    block to be there from the first token)."""
    close = st.marked(vocab, fmt.close, (fmt.close,))
    answer = st.free_text() if answer is None else answer
    think = st.seq(st.until(close), st.regex(GAP))
    if fmt.opened_by_prompt:
        return st.seq(think, answer)
    block = st.seq(st.marked(vocab, fmt.open, (fmt.open,)), think)
    return st.seq(block if require_thinking else st.optional(block), answer)


class ReasoningParser:
    """Splits an output into `{"reasoning_content": …}` and `{"content": …}` deltas as it is
    generated. Whitespace between the closing tag and the answer is dropped. Without a format
    everything is content."""

    def __init__(self, fmt: ThinkingFormat | None) -> None:
        self.fmt = fmt
        self.reasoning = ""
        self.content = ""
        self.closed = False
        self._buf = ""
        if fmt is None:
            self._state = "content"
        else:
            self._state = "think" if fmt.opened_by_prompt else "start"
        self.thinking = self._state == "think"
        self._out: list[dict] = []

    def feed(self, text: str) -> list[dict]:
        self._buf += text
        self._run(final=False)
        return self._take()

    def finish(self) -> list[dict]:
        self._run(final=True)
        if self._state == "think":
            self._emit("reasoning_content", self._buf)
        elif self._state in ("start", "content"):
            self._emit("content", self._buf)
        self._buf = ""
        return self._take()

    def _take(self) -> list[dict]:
        out, self._out = self._out, []
        return out

    def _emit(self, key: str, s: str) -> None:
        if not s:
            return
        if key == "content":
            self.content += s
        else:
            self.reasoning += s
        if self._out and key in self._out[-1]:
            self._out[-1][key] += s
        else:
            self._out.append({key: s})

    def _run(self, final: bool) -> None:
        fmt = self.fmt
        while True:
            if self._state == "start":
                body = self._buf.lstrip()
                if body.startswith(fmt.open):
                    self._buf = body[len(fmt.open):]
                    self._state = "think"
                    self.thinking = True
                elif not final and fmt.open.startswith(body):
                    return
                else:
                    self._state = "content"
            elif self._state == "think":
                at = self._buf.find(fmt.close)
                if at < 0:
                    keep = 0 if final else _held_back(self._buf, fmt.close)
                    self._emit("reasoning_content", self._buf[:len(self._buf) - keep])
                    self._buf = self._buf[len(self._buf) - keep:]
                    return
                self._emit("reasoning_content", self._buf[:at])
                self._buf = self._buf[at + len(fmt.close):]
                self._state = "gap"
                self.closed = True
            elif self._state == "gap":
                self._buf = self._buf.lstrip()
                if not self._buf:
                    return
                self._state = "content"
            else:
                self._emit("content", self._buf)
                self._buf = ""
                return


def split(text: str, fmt: ThinkingFormat | None) -> tuple[str | None, str]:
    """(reasoning_content, content) of a finished output; reasoning is None when the output
    has no thinking block."""
    p = ReasoningParser(fmt)
    p.feed(text)
    p.finish()
    return (p.reasoning if p.thinking else None), p.content


def _held_back(buf: str, tag: str) -> int:
    for k in range(min(len(buf), len(tag) - 1), 0, -1):
        if tag.startswith(buf[-k:]):
            return k
    return 0


class ReasoningBudget:
    """At most `max_tokens` tokens for the thinking block, its tags included.

    The decoding loop (`onyx.decoding.processors.ReasoningGate`) keeps one `state` per request,
    starting at `initial_state`, and while `is_open(state)`:
    - restricts the request's mask with `restrict(words, state, used)`, `used` being the
      tokens generated so far, then samples;
    - advances it with `advance(state, token)` after every committed token.
    Once the block is closed the budget no longer restricts anything. The request's own
    structure must start the block at the first token (`structure(..., require_thinking=True)`
    when the prompt does not open it), as this grammar does.
    """

    def __init__(self, vocab, fmt: ThinkingFormat, max_tokens: int) -> None:
        if max_tokens < 1:
            raise ValueError("a reasoning budget needs at least one token (the closing tag)")
        self.fmt = fmt
        self.max_tokens = max_tokens
        self.grammar = vocab.compile_structure(structure(fmt, st.free_text(), vocab, require_thinking=True))

    @property
    def initial_state(self) -> int:
        return self.grammar.initial_state

    def is_open(self, state: int) -> bool:
        return not self.grammar.is_accepting(state)

    def advance(self, state: int, token: int) -> int:
        """The state after `token`; a closed block stays closed whatever follows."""
        if not self.is_open(state):
            return state
        return self.grammar.advance(state, token)

    def restrict(self, words: np.ndarray, state: int, used: int) -> np.ndarray:
        """`words` (the request's uint32 mask for this step) without the tokens after which the
        block could no longer close within the budget. When nothing would be left (the budget
        is already spent and the close cannot come next), `words` unchanged: the request's
        grammar has the last word."""
        if not self.is_open(state):
            return words
        left = max(self.max_tokens - used - 1, 0)
        bound = self.grammar.token_bitmask_within(state, left)
        both = np.bitwise_and(words, bound)
        return both if both.any() else words
