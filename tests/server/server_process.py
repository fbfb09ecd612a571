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
def running_server(log_dir: Path, *args: str, startup_s: float = 300):
    """A server with these command-line arguments; yields {"base", "proc", "log"}. On exit it is
    stopped, and no traceback may be in its log."""
    port = free_port()
    log_path = log_dir / "server.log"
    log = open(log_path, "w")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("ONYX_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "onyx.server", "--port", str(port), "--log-level", "warning",
                             *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + startup_s
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"server did not come up:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield {"base": base, "proc": proc, "log": log_path}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert "Traceback" not in log_path.read_text(), log_path.read_text()[-3000:]
