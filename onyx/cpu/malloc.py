"""glibc's malloc arenas (Linux): a server keeps fewer of them.

glibc gives threads that allocate at the same time arenas of their own, up to eight per core,
and an arena keeps what was freed in it for reuse rather than returning it to the system. In a
server whose threads come and go (request preparation, background fills of KV view arrays) and
allocate large buffers, each arena keeps a peak of its own, so the resident memory grows by
steps long after the warm-up. Two arenas keep the retained memory near one peak.

Nothing happens on other C libraries (macOS, musl) or when `MALLOC_ARENA_MAX` is set in the
environment (the user's choice, read by glibc itself).
"""

from __future__ import annotations

import ctypes
import os
import platform

M_ARENA_MAX = -8  # glibc's mallopt parameter number
SERVER_ARENAS = 2


def limit_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """Caps glibc's arenas at `arenas` for the rest of the process (threads started later share
    them). True when the cap was set."""
    if os.environ.get("MALLOC_ARENA_MAX") or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_ARENA_MAX, arenas) == 1
