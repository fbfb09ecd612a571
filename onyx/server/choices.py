"""One generated sample as an OpenAI choice: the chat message (content, reasoning_content,
tool_calls), the finish reason, the logprobs, and the same as streamed deltas.

Whole answers and streams are built from the same engine objects (a `Result`, and the
`Chunk`s whose `deltas` the output parser wrote), so the streamed pieces of a choice reassemble
to its whole message. Logprobs come from the engine as one entry per token (`token`,
`logprob`, `bytes`, `top_logprobs`; see `onyx.decoding.logprobs` for the distribution they
describe) and are shaped here: chat's `{"content": [...]}`, or the completions endpoint's
parallel lists (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`).
"""

from __future__ import annotations


def finish_reason(reason: str) -> str:
    return reason if reason in ("length", "tool_calls") else "stop"


def chat_message(result) -> dict:
    msg = result.message()
    msg.setdefault("refusal", None)
    return msg


def _entry(e: dict) -> dict:
    return {"token": e["token"], "logprob": e["logprob"], "bytes": e["bytes"]}


def chat_logprobs(entries: list[dict] | None) -> dict | None:
    if entries is None:
        return None
    return {"content": [{**_entry(e), "top_logprobs": [_entry(a) for a in e["top_logprobs"]]} for e in entries],
            "refusal": None}


class CompletionLogprobs:
    """The completions endpoint's logprobs of one choice, piece after piece (`text_offset`
    continues across the pieces of a stream)."""

    def __init__(self) -> None:
        self.offset = 0

    def shape(self, entries: list[dict] | None) -> dict | None:
        if entries is None:
            return None
        out: dict = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for e in entries:
            out["tokens"].append(e["token"])
            out["token_logprobs"].append(e["logprob"])
            out["top_logprobs"].append({a["token"]: a["logprob"] for a in e["top_logprobs"]})
            out["text_offset"].append(self.offset)
            self.offset += len(e["token"])
        return out


def chat_choice(index: int, result) -> dict:
    return {"index": index, "message": chat_message(result), "logprobs": chat_logprobs(result.logprobs),
            "finish_reason": finish_reason(result.finish_reason)}


def completion_choice(index: int, result) -> dict:
    return {"index": index, "text": result.text, "logprobs": CompletionLogprobs().shape(result.logprobs),
            "finish_reason": finish_reason(result.finish_reason)}


def legacy_choice(choice: dict) -> dict:
    """A chat choice in the shape of legacy function calling: the first call as the message's
    `function_call` and finish reason `function_call` (a legacy request makes one call at most)."""
    msg = dict(choice["message"])
    calls = msg.pop("tool_calls", None)
    if calls:
        msg["function_call"] = dict(calls[0]["function"])
    reason = "function_call" if choice["finish_reason"] == "tool_calls" else choice["finish_reason"]
    return {**choice, "message": msg, "finish_reason": reason}


def legacy_delta(delta: dict) -> dict:
    """A streamed delta in legacy function calling's shape (`function_call` fragments)."""
    calls = delta.get("tool_calls")
    if not calls:
        return delta
    fn = calls[0].get("function") or {}
    part = {"arguments": fn.get("arguments", "")}
    if "name" in fn:
        part = {"name": fn["name"], **part}
    return {k: v for k, v in delta.items() if k != "tool_calls"} | {"function_call": part}


def chat_deltas(chunk) -> list[tuple[dict, dict | None]]:
    """A streamed chunk as (delta, logprobs) pairs, one per event: the parser's deltas in order,
    the chunk's logprobs on the first (an empty delta carries them when the parser held the
    text back)."""
    logprobs = chat_logprobs(chunk.logprobs)
    out: list[tuple[dict, dict | None]] = []
    for d in chunk.deltas:
        out.append((d, logprobs if not out else None))
    if not out and logprobs is not None:
        out.append(({}, logprobs))
    return out


def result_deltas(result) -> list[dict]:
    """A whole chat `Result` as the deltas its stream would have had, in output order."""
    out: list[dict] = []
    if result.reasoning_content:
        out.append({"reasoning_content": result.reasoning_content})
    if result.content:
        out.append({"content": result.content})
    for index, call in enumerate(result.tool_calls):
        kind = call.get("type", "function")
        body = dict(call[kind])
        out.append({"tool_calls": [{"index": index, "id": call["id"], "type": kind, kind: body}]})
    return out
