"""glibc's arena cap (`onyx.cpu.malloc`), in fresh interpreters: set where glibc is the C
library, left alone where the user chose `MALLOC_ARENA_MAX`."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc only")

PROBE = """
import ctypes, sys, tempfile, threading
from onyx.cpu.malloc import limit_arenas
print(limit_arenas(1))
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
barrier = threading.Barrier(8)
def work():
    ptrs = [libc.malloc(4096) for _ in range(256)]
    barrier.wait()  # eight threads allocating at once: without a cap, most get arenas of their own
    for p in ptrs:
        libc.free(p)
ts = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    fp = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    print(open(f.name).read().count("<heap nr="))
"""


def _run(arena_max: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if arena_max is not None:
        env["MALLOC_ARENA_MAX"] = arena_max
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_with_the_cap_threads_allocating_at_once_share_one_arena():
    assert _run(None) == ["True", "1"]


def test_a_users_malloc_arena_max_is_left_alone():
    # and then threads take arenas of their own, up to the user's cap
    applied, arenas = _run("4")
    assert applied == "False" and 1 < int(arenas) <= 4


RESTART_PROBE = """
import os, sys
from onyx.cpu import malloc
print("before", os.getpid(), malloc.allocator(), flush=True)
malloc.restart_with_fast_allocator()
print("after", os.getpid(), malloc.allocator(), malloc.limit_arenas(), sys.argv[1:])
"""


def _restart(env_extra: dict[str, str]) -> list[list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ONYX_MALLOC", "ONYX_MALLOC_RESTARTED")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", RESTART_PROBE, "x", "--y"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return [line.split(" ", 2) for line in out.stdout.splitlines()]


def test_a_model_process_starts_again_under_jemalloc_once_with_its_pid_and_arguments():
    from onyx.cpu.malloc import fast_allocator_path

    if fast_allocator_path() is None:
        pytest.skip("jemalloc is not installed (make system-deps installs Debian's libjemalloc2)")
    lines = _restart({})
    # the first process prints "before" and is replaced; the restarted one prints both lines
    assert [line[0] for line in lines] == ["before", "before", "after"], lines
    (_, pid0, first), (_, pid1, second), (_, pid2, rest) = lines
    assert pid0 == pid1 == pid2
    assert (first, second) == ("system", "jemalloc")
    allocator, arenas_capped, argv = rest.split(" ", 2)
    assert allocator == "jemalloc" and arenas_capped == "False"  # no glibc arena cap under jemalloc
    assert argv == "['x', '--y']"


def test_onyx_malloc_system_keeps_glibcs_malloc():
    lines = _restart({"ONYX_MALLOC": "system"})
    assert [line[0] for line in lines] == ["before", "after"], lines
    assert lines[1][2].split(" ")[0] == "system"
