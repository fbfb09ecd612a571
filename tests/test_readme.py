"""The README's commands and examples are the ones that work: its code blocks are extracted and
run against a real server (started as `make serve` would, on a free loopback port) and the real
default model."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import onyx.models.assets

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    port = _free_port()
    log = open(tmp_path_factory.mktemp("readme") / "server.log", "w")
    env = {k: v for k, v in os.environ.items() if k != "ONYX_API_KEY"}
    proc = subprocess.Popen([sys.executable, "-m", "onyx.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"server exited: {proc.returncode}")
            time.sleep(0.5)
        else:
            pytest.fail("server did not come up")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_python(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, **kw)


def test_the_two_commands_are_the_ones_ci_and_make_run():
    first = blocks("sh")[0]
    assert "make serve" in first and "make test" in first
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^serve:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_curl_example(base_url):
    curl = next(b for b in blocks("sh") if b.startswith("curl"))
    out = subprocess.run(["bash", "-c", curl.replace("http://127.0.0.1:8000", base_url)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{4}", body["choices"][0]["message"]["content"])


def test_openai_client_examples(base_url):
    for code in (b for b in blocks("python") if "OpenAI(" in b):
        out = run_python(code.replace("http://127.0.0.1:8000", base_url))
        assert out.returncode == 0, out.stderr[-2000:]
        lines = out.stdout.strip().splitlines()
        assert re.fullmatch(r"[A-Z]{3}-[0-9]{4}", lines[0])
        assert lines[1].startswith("True")
        city = json.loads("\n".join(lines[2:]))  # the last print: JSON, which may span lines
        assert isinstance(city["city"], str) and isinstance(city["population"], int)


def test_streaming_and_tools_example(base_url):
    """The block that goes on "with `client`" runs after the first block's client setup."""
    first = next(b for b in blocks("python") if "OpenAI(" in b)
    setup = first[:first.index("\n", first.index("client = OpenAI("))]
    code = next(b for b in blocks("python") if "stream=True" in b and "tools=" in b)
    out = run_python((setup + "\n" + code).replace("http://127.0.0.1:8000", base_url))
    assert out.returncode == 0, out.stderr[-2000:]
    streamed, call = out.stdout.strip().split("\n", 1)  # the call's JSON arguments may span lines
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{4}", streamed)
    name, arguments = call.split(" ", 1)
    assert name == "get_weather" and isinstance(json.loads(arguments)["city"], str)


def test_python_api_examples():
    engine_block = next(b for b in blocks("python") if "onyx.Engine()" in b)
    out = run_python(engine_block)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.match(r"[A-Z]{3}-[0-9]{4} True stop", out.stdout)
    core_block = next(b for b in blocks("python") if "Vocabulary.from_gguf" in b)
    code = core_block.replace('"model.gguf"', repr(str(onyx.models.assets.asset_path("smollm2"))))
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-2000:]


def test_cli_examples():
    cli = next(b for b in blocks("sh") if b.startswith("onyx chat"))
    onyx_bin = [sys.executable, "-m", "onyx.cli"]
    for line in cli.splitlines():
        cmd = line.split("#")[0].strip()
        if cmd.startswith(("onyx generate", "onyx validate")):
            args = subprocess.run(["bash", "-c", f"printf '%s\\n' {cmd[len('onyx '):]}"], capture_output=True, text=True).stdout.splitlines()
            out = subprocess.run(onyx_bin + args, cwd=ROOT, capture_output=True, text=True, timeout=300)
            if cmd.startswith("onyx validate"):
                assert out.returncode == 1 and "byte 2" in out.stdout + out.stderr
            else:
                assert out.returncode == 0, out.stderr[-1000:]
                assert re.fullmatch(r"[A-Z]{3}-[0-9]{4}", out.stdout.strip())
