"""`onyx chat` in a real pseudo-terminal (pexpect) with the real default model, and the other
runtime subcommands (`generate`, `models list`, `bench list`) as a script would call them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "you> "


def as_foreground_job() -> None:
    """Ctrl-C as a terminal delivers it to a foreground job. A test run started in the background
    by a shell without job control (`cmd &` in a script, as CI may do) inherits SIGINT ignored,
    and Python keeps an inherited ignore, so the chat would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn_chat(*extra: str):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "dumb"}
    child = pexpect.spawn(sys.executable, ["-m", "onyx.cli", "chat", "--max-tokens", "24", "--seed", "7", *extra],
                          cwd=str(ROOT), env=env, encoding="utf-8", timeout=180, dimensions=(50, 250),
                          preexec_fn=as_foreground_job)
    child.expect_exact(PROMPT)
    return child


def reply_to(child, message: str) -> str:
    """Sends a message; returns the streamed reply (text between 'onyx> ' and the next prompt)."""
    child.sendline(message)
    child.expect_exact("onyx> ")
    child.expect_exact(PROMPT)
    return child.before.replace("\r\n", "\n").strip()


def finish(child) -> int:
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    return child.exitstatus


def test_chat_session_regex_stats_quit():
    child = spawn_chat()
    try:
        first = reply_to(child, "Hello! Who are you?")
        assert first, "the model streamed no reply"

        child.sendline("/regex [0-9]{3}")
        child.expect_exact("constraint: regex [0-9]{3}")
        child.expect_exact(PROMPT)
        number = reply_to(child, "Pick a number.")
        assert re.fullmatch(r"[0-9]{3}", number), repr(number)

        # a bad pattern prints the error and the chat goes on (with the old constraint)
        child.sendline("/regex [0-9")
        child.expect_exact("error: invalid regex")
        child.expect_exact(PROMPT)
        again = reply_to(child, "Another one.")
        assert re.fullmatch(r"[0-9]{3}", again), repr(again)

        child.sendline("/stats")
        child.expect(r"last reply: \d+ tokens, [0-9.]+ tok/s")
        child.expect(r"speculative \(aware\): acceptance \d+% \(\d+ of \d+ drafted tokens\)")
        child.expect(r"session: 3 replies")
        child.expect_exact(PROMPT)
        assert "in this build" not in child.before

        # a schema pasted inline works like a schema file
        child.sendline('/schema {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], '
                       '"additionalProperties": false}')
        child.expect_exact("constraint: JSON Schema")
        child.expect_exact(PROMPT)
        reply = reply_to(child, "Give me a number as JSON.")
        assert isinstance(json.loads(reply)["n"], int), repr(reply)
        child.sendline("/schema {not json")
        child.expect_exact("error: the inline schema is not JSON")
        child.expect_exact(PROMPT)

        child.sendline("/clear")
        child.expect_exact("constraint: none")
        child.expect_exact(PROMPT)
        child.sendline("/quit")
        assert finish(child) == 0
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_chat_tools_file_arms_tools_and_prints_calls(tmp_path):
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                               "required": ["city"], "additionalProperties": False}}}
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": [weather], "tool_choice": "required"}))
    child = spawn_chat("--temperature", "0")
    try:
        child.sendline(f"/tools {path}")
        child.expect_exact("tools: get_weather")
        child.expect_exact(PROMPT)
        child.sendline("What is the weather in Paris?")
        child.expect(r'call get_weather\((\{.*\})\)  \[id call_')
        assert isinstance(json.loads(child.match.group(1))["city"], str)
        child.expect_exact(PROMPT)
        child.sendline(f"/tools {tmp_path / 'missing.json'}")
        child.expect_exact("error: cannot read tools from")
        child.expect_exact(PROMPT)
        child.sendline("/tools off")
        child.expect_exact("tools: off")
        child.expect_exact(PROMPT)
        assert reply_to(child, "Thanks. Say hello.")  # the conversation with a call still renders
        child.sendline("/quit")
        assert finish(child) == 0
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_chat_ctrl_d_and_ctrl_c_exit_cleanly(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                                  "required": ["n"], "additionalProperties": False}))
    child = spawn_chat("--schema", str(schema))
    try:
        reply = reply_to(child, "Give me a number as JSON.")
        assert isinstance(json.loads(reply)["n"], int)
        child.sendcontrol("d")
        assert finish(child) == 0
    finally:
        if child.isalive():
            child.terminate(force=True)

    child = spawn_chat()
    try:
        child.sendintr()
        assert finish(child) == 0
    finally:
        if child.isalive():
            child.terminate(force=True)


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onyx.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_generate_json_for_scripts():
    r = run_cli("generate", "Give me an order id.", "--regex", r"[A-Z]{2}-[0-9]{3}", "--json", "--max-tokens", "12")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert re.fullmatch(r"[A-Z]{2}-[0-9]{3}", result["text"]) and result["valid"] is True
    assert result["finish_reason"] == "stop" and result["stats"]["completion_tokens"] == len(result["token_ids"])
    bad = run_cli("generate", "x", "--regex", "(a")
    assert bad.returncode == 2 and "invalid regex" in bad.stderr


def test_models_list_and_bench_list():
    r = run_cli("models", "list", timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^smollm2 \(default\)\s+ready", r.stdout, re.M), r.stdout
    assert "gemma3-270m" in r.stdout
    b = run_cli("bench", "list", timeout=60)
    assert b.returncode == 0 and "grammar" in b.stdout
