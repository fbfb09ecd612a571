"""Starting a real `python -m onyx.server` subprocess (the real default model) on a free loopback
port, for the server tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_process(cmd: list[str], log_path: Path, health_url: str, *, startup_s: float = 300,
                    stop_s: float = 20, cwd: Path | None = None, env: dict | None = None):
    """A server process started with `cmd` (output to `log_path`), once `health_url` answers 200;
    yields the process and stops it on exit (a process that exits or does not come up in
    `startup_s` fails the test, with the end of its log)."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + startup_s
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(health_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"server did not come up:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=stop_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextlib.contextmanager
def running_server(log_dir: Path, *args: str, startup_s: float = 300):
    """A server with these command-line arguments; yields {"base", "proc", "log"}. On exit it is
    stopped, and no traceback may be in its log."""
    port = free_port()
    log_path = log_dir / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("ONYX_API_KEY", None)
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "onyx.server", "--port", str(port), "--log-level", "warning", *args]
    with running_process(cmd, log_path, base + "/health", startup_s=startup_s, cwd=ROOT, env=env) as proc:
        yield {"base": base, "proc": proc, "log": log_path}
    assert "Traceback" not in log_path.read_text(), log_path.read_text()[-3000:]
