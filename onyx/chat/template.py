"""A model's chat template, from a tokenizer or from a GGUF header, rendered one way.

Tool calling and reasoning need more of the template than the engine's `chat_ids` does: its
source (to detect the tool-call and thinking conventions it was written for) and renders with
`tools`, assistant `tool_calls` and `role: "tool"` messages. A template comes either with a
tokenizer (mlx-lm's wrapper or a Hugging Face tokenizer, which render it themselves) or as the
Jinja text of a GGUF header's `tokenizer.chat_template`, which is rendered here the way
Hugging Face renders templates (sandboxed Jinja, `trim_blocks`/`lstrip_blocks`, loop controls,
`tojson`, `raise_exception`, `strftime_now`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable


class TemplateError(ValueError):
    """The template failed to render these messages (it raised, or a value was missing)."""


class ChatTemplate:
    """`source` is the Jinja text (None when the model has no template); `render` renders a
    conversation. Build one with `from_tokenizer`, `from_gguf_metadata` or the constructor."""

    def __init__(self, source: str | None, *, bos_token: str = "", eos_token: str = "",
                 renderer: Callable[..., str] | None = None) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._renderer = renderer
        self._compiled = None

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ChatTemplate:
        """From mlx-lm's `TokenizerWrapper` or a Hugging Face tokenizer: its own
        `apply_chat_template` renders."""
        source = getattr(tokenizer, "chat_template", None)
        if not isinstance(source, str):
            source = None

        def render(messages, **kwargs):
            return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)

        return cls(source, renderer=render if source is not None else None)

    @classmethod
    def from_gguf_metadata(cls, meta: dict) -> ChatTemplate:
        """From `onyx.read_gguf_metadata(path)`: the template text, and the BOS and EOS token
        texts it may refer to."""
        tokens = meta.get("tokenizer.ggml.tokens") or []

        def text_of(key: str) -> str:
            i = meta.get(key)
            return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else ""

        return cls(meta.get("tokenizer.chat_template"), bos_token=text_of("tokenizer.ggml.bos_token_id"),
                   eos_token=text_of("tokenizer.ggml.eos_token_id"))

    def render(self, messages: list[dict], *, tools: list[dict] | None = None,
               add_generation_prompt: bool = True, **kwargs: Any) -> str:
        """The conversation as the template writes it. Without a template, the contents one per
        line (as the engine prompts such models). Raises `TemplateError` when the template
        raises or fails."""
        if self.source is None:
            return "\n".join(str(m.get("content") or "") for m in messages)
        if tools is not None:
            kwargs["tools"] = tools
        try:
            if self._renderer is not None:
                return self._renderer(messages, add_generation_prompt=add_generation_prompt, **kwargs)
            return self._jinja().render(messages=messages, add_generation_prompt=add_generation_prompt,
                                        bos_token=self.bos_token, eos_token=self.eos_token, **kwargs)
        except TemplateError:
            raise
        except Exception as e:  # a template can fail in any way Jinja or its own code allows
            raise TemplateError(f"the chat template failed to render: {type(e).__name__}: {e}") from e

    def _jinja(self):
        if self._compiled is None:
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
            env.filters["tojson"] = _tojson
            env.globals["raise_exception"] = _raise
            env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            self._compiled = env.from_string(self.source)
        return self._compiled


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: str) -> None:
    raise TemplateError(f"the chat template refused the conversation: {message}")
