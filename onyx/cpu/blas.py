"""OpenBLAS for MLX's CPU backend, and the few-row GEMM shim (Linux; nothing to do on macOS).

* Apple Silicon (macOS): MLX uses Accelerate; `ensure_fast_blas()` does nothing. (The device
  and weight dtype are chosen in `onyx.models.device`.)
* Linux (MLX's CPU backend, `mlx[cpu]`): the `mlx-cpu` wheel bundles the *reference* BLAS, far
  slower than OpenBLAS for the GEMMs a transformer does. Loading OpenBLAS into the process with
  `RTLD_GLOBAL` *before* `mlx.core` is first imported makes MLX's `cblas_sgemm` resolve to
  OpenBLAS (as `LD_PRELOAD` would). Loading it after `mlx.core` was imported has no effect, so
  `onyx/cpu/__init__.py` calls `ensure_fast_blas()`, and every part of Onyx that imports MLX
  imports `onyx.cpu` first (`import onyx` alone, the grammar core, loads no BLAS).

  Decoding multiplies one token's activations by every weight matrix: MLX calls `cblas_sgemm`
  with M=1, which OpenBLAS runs several times slower than `cblas_sgemv` (it packs the whole
  weight matrix first), and with a few rows (verifying draft tokens, a batch of requests) it
  costs a multiple of a single token. So, when a C compiler is available, `ensure_fast_blas()`
  also builds (once, cached, with the host's vector instructions) and preloads a small shim
  (`blas_shim.c`) that exports `cblas_sgemm`, runs x @ W^T with 1..32 rows in its own kernels
  (each weight row read once for all rows, register tiles sized for the machine's vector
  registers; a row's result has the same bits whatever other rows share the call), and up to
  512 rows of weight products (K >= 256: prompt chunks, wide steps) in pieces of at most 32
  (each reads the weights again, and split between two threads like the other products), sends
  other one-row / one-column products to `cblas_sgemv` and everything else to OpenBLAS's
  `cblas_sgemm`. Without a compiler it falls back to plain OpenBLAS. `bench/matmul_bench.py`
  measures the kernels against OpenBLAS. The shim also multiplies by quantized weights
  (`quant_shim.c`, compiled with it; see `onyx.cpu.quant`).

  The shim splits a few-row product between two threads (`shim_threads()`): chunks of weight
  rows, claimed one at a time by the calling thread and a helper, so a helper that loses its core
  to another process costs at most one chunk (and after such a wait the next products run alone
  for a while). A row's bits do not depend on the split. OpenBLAS itself runs single-threaded by
  default here: its threads split every product in fixed halves and wait for each other, so on a
  2-core machine one busy process beside them slows every product down to the slower half.

  Environment: `ONYX_BLAS_LIB=/path/to/libopenblas.so` picks another library, `ONYX_BLAS_LIB=none`
  turns all of this off; `ONYX_BLAS_SHIM=0` keeps OpenBLAS but skips the shim;
  `ONYX_SHIM_THREADS=N` sets the threads of the shim's products (1: no split);
  `ONYX_BLAS_THREADS=N` sets OpenBLAS's thread count. Library users who import `mlx` before
  `onyx` can start Python with
  `LD_PRELOAD=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3` (Debian/Ubuntu package
  `libopenblas0-pthread`), or call `reexec_with_openblas()` first thing in a script.

Nothing in this module prints; `blas_status()` says what happened, for diagnostics.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import platform as _platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Where OpenBLAS lives on common Linux distributions (first hit wins). The pthread build first:
# the OpenMP build can fight MLX's own thread pool.
_BLAS_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",  # Debian/Ubuntu libopenblas0-pthread
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib64/libopenblasp.so.0",  # Fedora/RHEL openblas-threads
    "/usr/lib64/libopenblas.so.0",
    "/usr/lib/libopenblas.so.0",  # Arch
)

APT_PACKAGE = "libopenblas0-pthread"

_state: dict[str, str | None] = {"loaded": None, "note": None, "shim": None, "threads": None}

# The cblas_sgemm shim (see the module docstring). `onyx_blas_shim_init(path)` binds it to the
# OpenBLAS at `path`; when preloaded with LD_PRELOAD instead, it binds lazily to the next
# `cblas_sgemm` / `cblas_sgemv` in the search order (RTLD_NEXT).
# `quant_shim.c` (quantized weights, `onyx.cpu.quant`) and `softmax_shim.c` (`onyx.cpu.exp`) are
# compiled in the same unit, after it.
_SHIM_SOURCE = "".join((Path(__file__).parent / name).read_text()
                       for name in ("blas_shim.c", "quant_shim.c", "softmax_shim.c"))


def find_blas_library() -> str | None:
    """Path of an OpenBLAS library to preload, or None ($ONYX_BLAS_LIB overrides; "none" = off)."""
    override = os.environ.get("ONYX_BLAS_LIB")
    if override:
        return None if override.lower() in ("none", "0", "off", "") else override
    for path in _BLAS_CANDIDATES:
        if Path(path).is_file():
            return path
    found = ctypes.util.find_library("openblas")
    return found


def _cpu_flags() -> str:
    """The CPU's feature flags (Linux), so a shim built with -march=native is rebuilt on another
    CPU sharing the same cache directory."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def shim_path() -> Path:
    """Where the compiled shim is cached (keyed by its source and the machine)."""
    from onyx.paths import cache_dir

    key = hashlib.sha256(f"{_SHIM_SOURCE}|{_platform.machine()}|{_cpu_flags()}".encode()).hexdigest()[:12]
    return cache_dir() / "blas" / f"libonyx_sgemv_shim-{key}.so"


def build_shim() -> Path | None:
    """Compiles the shim once (with $CC, cc or gcc) into the cache; None when that fails."""
    dest = shim_path()
    if dest.is_file():
        return dest
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        return None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            src = Path(tmp) / "shim.c"
            src.write_text(_SHIM_SOURCE)
            out = Path(tmp) / dest.name
            for flags in (["-O3", "-march=native"], ["-O3"]):  # native vector width, else portable
                cmd = [compiler, *flags, "-shared", "-fPIC", "-o", str(out), str(src), "-ldl", "-pthread"]
                proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
                if proc.returncode == 0 and out.is_file():
                    break
            else:
                return None
            os.replace(out, dest)
        return dest
    except (OSError, subprocess.SubprocessError):
        return None


def _blas_threads() -> int:
    try:
        return max(1, int(os.environ.get("ONYX_BLAS_THREADS", "1")))
    except ValueError:
        return 1


def shim_threads() -> int:
    """Threads that share one few-row product in the shim (`ONYX_SHIM_THREADS`; default: two
    when the process may run on two cores or more, else one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        return max(1, int(os.environ.get("ONYX_SHIM_THREADS", "")))
    except ValueError:
        return min(2, cores)


def _set_shim_threads(lib: ctypes.CDLL) -> None:
    try:
        lib.onyx_blas_shim_threads(shim_threads())
    except AttributeError:
        pass


def _set_threads(lib: ctypes.CDLL) -> None:
    try:
        n = _blas_threads()
        lib.openblas_set_num_threads(n)
        _state["threads"] = str(n)
    except AttributeError:
        pass


def _preloaded_via_env() -> str | None:
    preload = os.environ.get("LD_PRELOAD", "")
    for entry in preload.replace(":", " ").split():
        if "blas" in Path(entry).name.lower():
            return entry
    return None


def ensure_fast_blas() -> bool:
    """Makes MLX's CPU backend use OpenBLAS instead of the reference BLAS it bundles (Linux).

    Must run before `mlx.core` is first imported in the process; idempotent; never raises and
    never prints. Returns True when OpenBLAS is (or will be) the BLAS MLX uses. On macOS and
    when OpenBLAS is not installed it does nothing (see `blas_status()`)."""
    if not sys.platform.startswith("linux"):
        return False
    if _state["loaded"]:
        return True
    env = _preloaded_via_env()
    if env:
        _state["loaded"] = env
        _state["note"] = "LD_PRELOAD"
        if "sgemv_shim" in os.environ.get("LD_PRELOAD", ""):
            _state["shim"] = "LD_PRELOAD"
            _set_shim_threads(ctypes.CDLL(None))
        try:
            _set_threads(ctypes.CDLL(env, mode=ctypes.RTLD_GLOBAL))
        except OSError:
            pass
        return True
    path = find_blas_library()
    if path is None:
        _state["note"] = ("disabled by ONYX_BLAS_LIB" if os.environ.get("ONYX_BLAS_LIB")
                          else f"OpenBLAS not found (apt-get install {APT_PACKAGE})")
        return False
    if "mlx.core" in sys.modules:
        _state["note"] = "mlx.core was imported before ensure_fast_blas(): too late to preload"
        return False
    try:  # load it privately first: the shim must not become global unless OpenBLAS works
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        lib.cblas_sgemm, lib.cblas_sgemv  # noqa: B018 (AttributeError if missing)
    except (OSError, AttributeError) as e:
        _state["note"] = f"could not use {path}: {e}"
        return False
    if os.environ.get("ONYX_BLAS_SHIM", "1") not in ("0", "off", "none"):
        shim = build_shim()
        if shim is not None:
            try:
                probe = ctypes.CDLL(str(shim), mode=ctypes.RTLD_LOCAL)
                if probe.onyx_blas_shim_init(path.encode()) == 0:
                    _set_shim_threads(ctypes.CDLL(str(shim), mode=ctypes.RTLD_GLOBAL))  # before OpenBLAS
                    _state["shim"] = str(shim)
            except (OSError, AttributeError):
                pass
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # promote: MLX's other BLAS symbols
    _set_threads(lib)
    _state["loaded"] = path
    _state["note"] = "dlopen(RTLD_GLOBAL) before mlx.core"
    return True


def reexec_with_openblas(argv: list[str] | None = None) -> None:
    """For console scripts that must import MLX before Onyx: re-executes the process once with
    LD_PRELOAD naming OpenBLAS. Does nothing on macOS, when LD_PRELOAD already names a BLAS,
    when no OpenBLAS is installed, or when this process is already the re-executed one."""
    if (not sys.platform.startswith("linux") or _state["loaded"] or _preloaded_via_env()
            or os.environ.get("_ONYX_REEXEC")):
        return  # nothing to do, already fast, or already re-executed once
    path = find_blas_library()
    if path is None:
        return
    preload = [path]
    if os.environ.get("ONYX_BLAS_SHIM", "1") not in ("0", "off", "none"):
        shim = build_shim()
        if shim is not None:
            preload.insert(0, str(shim))  # before OpenBLAS: binds to it through RTLD_NEXT
    env = dict(os.environ)
    if env.get("LD_PRELOAD"):
        preload.append(env["LD_PRELOAD"])
    env["LD_PRELOAD"] = ":".join(preload)
    env["_ONYX_REEXEC"] = "1"
    args = [sys.executable] + (sys.argv if argv is None else argv)
    os.execve(sys.executable, args, env)


def shim_library() -> ctypes.CDLL | None:
    """The loaded shim (for its other entry points, e.g. `onyx.cpu.quant`), or None when this
    process runs without it."""
    where = _state["shim"]
    if not where:
        return None
    try:
        lib = ctypes.CDLL(None) if where == "LD_PRELOAD" else ctypes.CDLL(where, mode=ctypes.RTLD_GLOBAL)
        lib.onyx_quant_register  # noqa: B018 (AttributeError: a shim built before quantized weights)
        return lib
    except (OSError, AttributeError):
        return None


def blas_status() -> str:
    """One line saying which BLAS MLX's CPU backend uses in this process, and why."""
    if sys.platform == "darwin":
        return "Accelerate (macOS: MLX uses Apple's BLAS; nothing to do)"
    if not sys.platform.startswith("linux"):
        return f"MLX's bundled BLAS ({sys.platform}: no preload attempted)"
    if _state["loaded"] is None and _state["note"] is None:
        env = _preloaded_via_env()
        if env:
            return f"OpenBLAS via LD_PRELOAD={env}"
        where = "mlx.core already imported" if "mlx.core" in sys.modules else "not yet attempted"
        return f"MLX's bundled reference BLAS (slow; ensure_fast_blas() {where})"
    if _state["loaded"]:
        extras = [_state["note"]]
        if _state["threads"]:
            extras.append(f"{_state['threads']} thread(s)")
        extras.append(f"sgemm shim: x @ W^T with 1..512 rows -> its own kernels on {shim_threads()} thread(s)"
                      if _state["shim"] else "no sgemm shim")
        return f"OpenBLAS {_state['loaded']} ({'; '.join(extras)})"
    return f"MLX's bundled reference BLAS (slow): {_state['note']}"
