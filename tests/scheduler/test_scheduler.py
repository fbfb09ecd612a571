"""onyx.scheduler's worker thread at the end of its life, in a process of its own that exits the
ordinary way (Python's finalization, no `os._exit`): an explicitly closed engine's OS thread is
gone when `close()` returns, and at interpreter exit a live engine's worker is parked, not ended,
so that its thread-local destructors (MLX's compile cache takes the GIL) never run while the
interpreter finalizes. That race aborted about one exit in fifteen ("terminate called without an
active exception")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")

SCRIPT = textwrap.dedent(
    """
    import atexit, os, sys

    def report():  # registered before onyx's exit hook, so it runs after it
        t = live.scheduler._thread
        print("live", t.is_alive(), live.scheduler._parked.is_set(), flush=True)
        try:
            live.generate("Hi", max_tokens=2)
        except RuntimeError as e:
            print("refused", e, flush=True)

    atexit.register(report)
    import onyx

    closed = onyx.Engine()
    closed.generate("Hello", max_tokens=4)
    tid = closed.scheduler._thread.native_id
    closed.close()
    print("closed", os.path.exists(f"/proc/self/task/{tid}"), flush=True)

    live = onyx.Engine()
    live.generate("Write an email address:", max_tokens=8, regex=r"[a-z]+@[a-z]+\\\\.com")
    """
)


def test_worker_threads_end_cleanly_on_close_and_park_at_exit():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "terminate called" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert "closed False" in lines, proc.stdout  # the OS thread had ended when close() returned
    assert "live True True" in lines, proc.stdout  # at exit: alive, parked
    assert "refused the engine is closed" in lines, proc.stdout
