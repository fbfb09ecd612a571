"""The C allocator on Linux: jemalloc for the processes that run a model, and fewer glibc arenas.

MLX's CPU backend allocates and frees several small objects for every operation it runs (the
output array's description, the task, its buffers), a few thousand operations per decoded
token. glibc's malloc spends several microseconds on each of them when two threads allocate
and free in turn, so on a small model it is a large share of a step; jemalloc does the same
work in a fraction of that (every bench's results name the allocator it ran on). A
process cannot change its allocator once it has started, so `restart_with_fast_allocator`
starts the process again in place (`execve`, same pid and arguments) with jemalloc preloaded
(`LD_PRELOAD`), when Debian's `libjemalloc2` is installed (`make system-deps` installs it).
The server and the CLI commands that run a model call it first; Onyx imported as a library
leaves the host process's allocator alone. `ONYX_MALLOC=system` keeps glibc's malloc.

Under glibc's malloc, `limit_arenas` caps its arenas: glibc gives threads that allocate at the
same time arenas of their own, up to eight per core, and each keeps a peak of its own, so a
server's resident memory grows by steps long after the warm-up. Two arenas keep it near one
peak. Nothing happens on other C libraries (macOS, musl) or when `MALLOC_ARENA_MAX` is set in
the environment (the user's choice, read by glibc itself).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
from pathlib import Path

M_ARENA_MAX = -8  # glibc's mallopt parameter number
SERVER_ARENAS = 2

JEMALLOC = "libjemalloc.so.2"
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                "/usr/local/lib")
CHOICE_ENV = "ONYX_MALLOC"  # "system": keep glibc's malloc
_RESTARTED_ENV = "ONYX_MALLOC_RESTARTED"  # set in the restarted process, so it never loops


def fast_allocator_path() -> str | None:
    """Where jemalloc is installed on this Linux machine, or None."""
    if platform.system() != "Linux":
        return None
    for d in LIBRARY_DIRS:
        p = Path(d) / JEMALLOC
        if p.is_file():
            return str(p)
    return None


@functools.cache
def allocator() -> str:
    """The allocator this process runs on: "jemalloc" when it is loaded, else "system" (it
    cannot change while the process runs)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "system"
    return "jemalloc" if "/libjemalloc" in maps else "system"


def restart_with_fast_allocator() -> None:
    """On Linux with jemalloc installed, replaces this process with itself (same executable,
    arguments and pid) with jemalloc preloaded; returns without doing anything when jemalloc is
    missing or already loaded, `ONYX_MALLOC=system` is set, this process is already the
    restarted one, or the restart fails. Call it first, before threads start or output is
    written."""
    if os.environ.get(CHOICE_ENV, "").lower() == "system" or os.environ.get(_RESTARTED_ENV):
        return
    path = fast_allocator_path()
    if path is None or allocator() == "jemalloc":
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(p for p in (path, env.get("LD_PRELOAD", "")) if p)
    env[_RESTARTED_ENV] = "1"
    argv = [sys.executable, *sys.orig_argv[1:]]
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, argv, env)
    except OSError:
        return


def limit_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """Caps glibc's arenas at `arenas` for the rest of the process (threads started later share
    them). True when the cap was set."""
    if os.environ.get("MALLOC_ARENA_MAX") or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if allocator() != "system":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_ARENA_MAX, arenas) == 1
