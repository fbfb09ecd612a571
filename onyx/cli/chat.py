"""`onyx chat`: an interactive chat in the terminal that streams each reply and keeps the
conversation; commands change the constraint on the fly, and `/tools FILE` arms OpenAI function
tools: the model may then call them, and each call is printed (name and JSON arguments) and kept
in the conversation. Thinking (`reasoning_content`) is printed apart from the answer."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from onyx.cli.common import (DTYPE_HELP, CliError, constraint_from, engine_or_error, non_negative_float, non_negative_int,
                             positive_int)


CHAT_HELP = """commands:
  /regex PATTERN   constrain the replies to a regex (full match)
  /schema S        constrain the replies to a JSON Schema (a file, or the schema as JSON)
  /clear           remove the constraint
  /tools FILE      arm the tools in FILE (a JSON list of OpenAI function or custom tools); /tools off disarms
  /reset           forget the conversation
  /stats           speed (tok/s) and speculative acceptance of the last reply and the session
  /help            this text
  /quit            leave (so do Ctrl-C and Ctrl-D)"""


def cmd_chat(args: argparse.Namespace) -> int:
    """onyx chat: an interactive chat that streams the reply and keeps the conversation."""
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    engine = engine_or_error(args.model, args.dtype)
    try:
        constraint = constraint_from(engine, args.regex, args.schema)
    except ValueError as e:
        raise CliError(str(e).splitlines()[0]) from None
    options = {"max_tokens": args.max_tokens, "temperature": args.temperature}
    if args.seed is not None:
        options["seed"] = args.seed
    history: list[dict] = []
    if args.system:
        history.append({"role": "system", "content": args.system})
    session = {"replies": 0, "tokens": 0, "decode_s": 0.0, "drafted": 0, "accepted": 0}
    last: dict | None = None
    tools: dict = {}
    if args.tools:
        try:
            tools = load_tools(args.tools)
        except ValueError as e:
            raise CliError(str(e)) from None

    def describe(c: dict) -> str:
        if "regex" in c:
            return f"regex {c['regex']}"
        if "json_schema" in c:
            return "JSON Schema"
        return "none"

    print(f"onyx chat with {engine.model_name} (constraint: {describe(constraint)}). "
          f"/help for commands, /quit or Ctrl-D to leave.", file=sys.stderr, flush=True)
    while True:
        try:
            line = input("you> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            rest = rest.strip()
            if command in ("/quit", "/exit", "/q"):
                return 0
            if command == "/help":
                print(CHAT_HELP)
            elif command == "/regex":
                if not rest:
                    print("usage: /regex PATTERN")
                    continue
                try:
                    constraint = constraint_from(engine, rest, None)
                    print(f"constraint: regex {rest}")
                except ValueError as e:  # GrammarError is a ValueError
                    print(f"error: {e}")
            elif command == "/schema":
                if not rest:
                    print("usage: /schema FILE, or /schema {...} with the schema inline")
                    continue
                try:
                    constraint = constraint_from(engine, None, rest)
                    print("constraint: JSON Schema" + ("" if rest.lstrip().startswith("{") else f" from {rest}"))
                except ValueError as e:
                    print(f"error: {e}")
            elif command == "/tools":
                if not rest:
                    print("usage: /tools FILE, or /tools off")
                    continue
                try:
                    tools = {} if rest == "off" else load_tools(rest)
                    names = [t[t.get("type", "function")]["name"] for t in tools.get("tools", [])]
                    print(f"tools: {', '.join(names)}" if names else "tools: off")
                except ValueError as e:
                    print(f"error: {e}")
            elif command == "/clear":
                constraint = {}
                print("constraint: none")
            elif command == "/reset":
                history = history[:1] if args.system else []
                print("conversation cleared")
            elif command == "/stats":
                print(_chat_stats(last, session))
            else:
                print(f"unknown command {command}; /help lists them")
            continue

        history.append({"role": "user", "content": text})
        try:
            chunks = engine.chat(history, stream=True, **options, **constraint, **tools)
        except ValueError as e:  # RequestError / GrammarError
            history.pop()
            print(f"error: {e}")
            continue
        sys.stdout.write("onyx> ")
        sys.stdout.flush()
        result = None
        try:
            for chunk in chunks:
                for delta in chunk.deltas:
                    _show(delta)
                if chunk.result is not None:
                    result = chunk.result
        except KeyboardInterrupt:
            chunks.close()  # frees the sequence
            print()
            return 0
        except ValueError as e:  # a grammar error found while generating
            chunks.close()
            history.pop()
            print(f"\nerror: {e}")
            continue
        print()
        if result is None:
            history.pop()
            continue
        for call in result.tool_calls:
            if call["type"] == "custom":
                print(f"call {call['custom']['name']}({call['custom']['input']!r})  [id {call['id']}]")
            else:
                print(f"call {call['function']['name']}({call['function']['arguments']})  [id {call['id']}]")
        history.append(result.message())
        last = dict(result.stats, valid=result.valid, finish_reason=result.finish_reason)
        session["replies"] += 1
        session["tokens"] += int(last.get("completion_tokens", 0))
        session["decode_s"] += float(last.get("decode_s", 0.0))
        session["drafted"] += int(last.get("drafted", 0) or 0)
        session["accepted"] += int(last.get("accepted", 0) or 0)
        if result.valid is False:
            print("(the reply was cut at --max-tokens before the constraint was complete)", file=sys.stderr)


def load_tools(path: str) -> dict:
    """`tools` and `tool_choice` from a JSON file: a list of OpenAI function tools (choice
    "auto"), or an object with a `tools` list and optionally a `tool_choice`. Raises ValueError."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read tools from {path}: {e}") from None
    choice = "auto"
    if isinstance(data, dict):
        data, choice = data.get("tools"), data.get("tool_choice", "auto")
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path} must hold a non-empty JSON list of tools")
    from onyx.options import parse_tool_choice, parse_tools

    parse_tool_choice(choice, parse_tools(data))  # RequestError (a ValueError) names what is wrong
    return {"tools": data, "tool_choice": choice}


def _show(delta: dict) -> None:
    """Writes one streamed delta: thinking dimmed in brackets, content as it comes; tool calls
    are printed whole once the reply ends."""
    if delta.get("reasoning_content"):
        sys.stdout.write(f"[{delta['reasoning_content']}]")
    elif delta.get("content"):
        sys.stdout.write(delta["content"])
    sys.stdout.flush()


def _chat_stats(last: dict | None, session: dict) -> str:
    if last is None:
        return "no reply yet"
    lines = [f"last reply: {last.get('completion_tokens', 0)} tokens, "
             f"{float(last.get('tokens_per_s', 0.0)):.1f} tok/s, "
             f"first token after {float(last.get('ttft_s', 0.0)):.2f}s, "
             f"finish {last.get('finish_reason')}, valid {last.get('valid')}"]
    if "acceptance_rate" in last:
        lines.append(f"speculative ({last.get('speculative', 'on')}): acceptance "
                     f"{100 * float(last['acceptance_rate']):.0f}% "
                     f"({last.get('accepted', 0)} of {last.get('drafted', 0)} drafted tokens)")
    else:
        lines.append("speculative: off for this reply")
    rate = session["tokens"] / session["decode_s"] if session["decode_s"] > 0 else 0.0
    acc = (f", acceptance {100 * session['accepted'] / session['drafted']:.0f}%"
           if session["drafted"] else "")
    lines.append(f"session: {session['replies']} replies, {session['tokens']} tokens, {rate:.1f} tok/s{acc}")
    return "\n".join(lines)


def add_chat(sub) -> None:
    p = sub.add_parser("chat", help="chat with a model in the terminal (streamed, constrainable)",
                       description="Interactive chat; the reply streams as it is generated.\n\n" + CHAT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--dtype", default=None, choices=["quantized", "float32"], help=DTYPE_HELP)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--regex", default=None, metavar="R", help="constrain replies to this regex")
    g.add_argument("--schema", default=None, metavar="S", help="constrain replies to this JSON Schema (a file, or the schema as JSON)")
    p.add_argument("--system", default=None, help="a system message")
    p.add_argument("--tools", default=None, metavar="FILE", help="arm the tools in FILE (as /tools FILE)")
    p.add_argument("--max-tokens", type=positive_int, default=256, metavar="N", help="per reply (default 256)")
    p.add_argument("--temperature", type=non_negative_float, default=0.7, metavar="T",
                   help="0 = greedy (default 0.7)")
    p.add_argument("--seed", type=non_negative_int, default=None, metavar="S")
    p.set_defaults(func=cmd_chat)


