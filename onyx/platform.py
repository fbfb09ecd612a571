"""Runtime choices that depend on the platform: which MLX device, which BLAS, which dtype.

Nothing here is hard-coded for one OS: every choice is made from what the running machine is.

* Apple Silicon (macOS, arm64): MLX runs on Metal; quantized weights stay quantized; the BLAS
  question does not arise (MLX uses Accelerate). `ensure_fast_blas()` does nothing.
* Linux (MLX's CPU backend, `mlx[cpu]`): the `mlx-cpu` wheel bundles the *reference* BLAS, about
  25x slower than OpenBLAS for the GEMMs a transformer does. Loading OpenBLAS into the process
  with `RTLD_GLOBAL` *before* `mlx.core` is first imported makes MLX's `cblas_sgemm` resolve to
  OpenBLAS (measured: f32 256x576 @ 576x1536 takes 68 ms with the bundled BLAS, 4.4 ms after
  the preload, the same as with `LD_PRELOAD`). Loading it after `mlx.core` was imported has no
  effect, so `onyx/__init__.py` calls `ensure_fast_blas()` before anything imports MLX.

  Decoding multiplies one token's activations by every weight matrix: MLX calls `cblas_sgemm`
  with M=1, which OpenBLAS 0.3.21 (Debian 12) runs 3-4x slower than `cblas_sgemv` (it packs the
  whole weight matrix first), and with M = 2..8 (verifying a few draft tokens) it costs twice a
  single token. So, when a C compiler is available, `ensure_fast_blas()` also builds (once,
  cached next to the assets) and preloads a small shim that exports `cblas_sgemm`, runs x @ W^T
  with 1..8 rows in its own kernels that stream each weight row once (for one row, 34-36 GB/s
  where OpenBLAS's sgemv draws 29-32 GB/s here), sends other one-row / one-column products to
  `cblas_sgemv` and everything else to OpenBLAS's `cblas_sgemm`. Without a compiler it falls
  back to plain OpenBLAS.

  OpenBLAS runs single-threaded by default here: on a 2-core machine its threads wait for each
  other's share of every product, so one busy process beside them is ruinous (measured: 2
  threads 33 tok/s on an idle machine but 10 tok/s next to one busy process, where 1 thread
  keeps 25).

  Environment: `ONYX_BLAS_LIB=/path/to/libopenblas.so` picks another library, `ONYX_BLAS_LIB=none`
  turns all of this off; `ONYX_BLAS_SHIM=0` keeps OpenBLAS but skips the shim;
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
_SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
typedef void (*gemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                       float, float *, int);
typedef void (*gemv_t)(int, int, int, int, float, const float *, int, const float *, int, float,
                       float *, int);
static gemm_t real_gemm;
static gemv_t real_gemv;

int onyx_blas_shim_init(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    real_gemm = (gemm_t)dlsym(h, "cblas_sgemm");
    real_gemv = (gemv_t)dlsym(h, "cblas_sgemv");
    return (real_gemm && real_gemv) ? 0 : -2;
}

int onyx_blas_shim_ready(void) { return real_gemm != 0 && real_gemv != 0; }

static void gemv(int trans, int m, int n, float alpha, const float *a, int lda, const float *x,
                 int incx, float beta, float *y, int incy, int leny) {
    if (beta == 0.0f) {  /* C may be uninitialised memory: never let 0 * NaN through */
        if (incy == 1) memset(y, 0, sizeof(float) * (size_t)leny);
        else for (int i = 0; i < leny; i++) y[(size_t)i * incy] = 0.0f;
    }
    real_gemv(RowMajor, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

/* x @ W^T for 1 to 8 rows of x: C = alpha * A @ B^T + beta * C with A (M x K), B (N x K), both
   row-major. This is what a decode step (M = 1) and the verification of a few draft tokens
   (M = 2..8) multiply, and decoding is bound by how fast the weights stream from memory: every
   weight row is read once, front to back, for all M rows of A. (OpenBLAS's sgemm repacks the
   whole matrix on every call, so a 2-row product cost twice a 1-row one; its sgemv drew 29-32
   GB/s here where `one_row` draws 34-36 GB/s.) */
typedef float v8 __attribute__((vector_size(32)));
enum { SMALL_M = 8 };

/* One row of A: one weight row at a time (a single stream, which the hardware prefetcher
   follows best), four independent accumulator chains to hide the FMA latency. */
static void one_row(int N, int K, float alpha, const float *x, const float *B, int ldb, float beta,
                    float *C) {
    const int K32 = K & ~31, K8 = K & ~7;
    for (int j = 0; j < N; j++) {
        const float *w = B + (size_t)j * ldb;
        v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, xv, u;
        int k = 0;
        for (; k < K32; k += 32) {
            memcpy(&xv, x + k, sizeof xv); memcpy(&u, w + k, sizeof u); a0 += xv * u;
            memcpy(&xv, x + k + 8, sizeof xv); memcpy(&u, w + k + 8, sizeof u); a1 += xv * u;
            memcpy(&xv, x + k + 16, sizeof xv); memcpy(&u, w + k + 16, sizeof u); a2 += xv * u;
            memcpy(&xv, x + k + 24, sizeof xv); memcpy(&u, w + k + 24, sizeof u); a3 += xv * u;
        }
        for (; k < K8; k += 8) {
            memcpy(&xv, x + k, sizeof xv); memcpy(&u, w + k, sizeof u); a0 += xv * u;
        }
        a0 = (a0 + a1) + (a2 + a3);
        float s = 0.0f;
        for (int l = 0; l < 8; l++) s += a0[l];
        for (; k < K; k++) s += x[k] * w[k];
        C[j] = beta == 0.0f ? alpha * s : alpha * s + beta * C[j];  /* C may be uninitialised */
    }
}

static inline __attribute__((always_inline)) void
gemm_few_rows(const int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc) {
    enum { TILE = 64 };  /* outputs are staged per tile and written row by row: M long streams */
    const int K8 = K & ~7;
    float out[SMALL_M][TILE];
    for (int j0 = 0; j0 < N; j0 += TILE) {
        const int nj = N - j0 < TILE ? N - j0 : TILE;
        for (int jj = 0; jj < nj; jj++) {
            const float *w = B + (size_t)(j0 + jj) * ldb;
            v8 acc[SMALL_M];
            for (int m = 0; m < M; m++) acc[m] = (v8){0, 0, 0, 0, 0, 0, 0, 0};
            for (int k = 0; k < K8; k += 8) {
                v8 wv;
                memcpy(&wv, w + k, sizeof wv);
                for (int m = 0; m < M; m++) {
                    v8 xv;
                    memcpy(&xv, A + (size_t)m * lda + k, sizeof xv);
                    acc[m] += xv * wv;
                }
            }
            for (int m = 0; m < M; m++) {
                const float *x = A + (size_t)m * lda;
                float s = 0.0f;
                for (int l = 0; l < 8; l++) s += acc[m][l];
                for (int k = K8; k < K; k++) s += x[k] * w[k];
                out[m][jj] = s;
            }
        }
        for (int m = 0; m < M; m++) {
            float *c = C + (size_t)m * ldc + j0;
            if (beta == 0.0f) for (int jj = 0; jj < nj; jj++) c[jj] = alpha * out[m][jj];
            else for (int jj = 0; jj < nj; jj++) c[jj] = alpha * out[m][jj] + beta * c[jj];
        }
    }
}

static int few_rows(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc) {
    switch (M) {  /* a constant M per case: the accumulators stay in registers */
    case 2: gemm_few_rows(2, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    case 3: gemm_few_rows(3, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    case 4: gemm_few_rows(4, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    case 5: gemm_few_rows(5, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    case 6: gemm_few_rows(6, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    case 7: gemm_few_rows(7, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    case 8: gemm_few_rows(8, N, K, alpha, A, lda, B, ldb, beta, C, ldc); return 1;
    default: return 0;
    }
}

void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (!real_gemm) {
        real_gemm = (gemm_t)dlsym(RTLD_NEXT, "cblas_sgemm");
        real_gemv = (gemv_t)dlsym(RTLD_NEXT, "cblas_sgemv");
    }
    if (order == RowMajor && K > 0 && real_gemv) {
        if (M == 1 && ta == NoTrans && tb == Trans) {  /* x @ W^T: a decode step */
            one_row(N, K, alpha, A, B, ldb, beta, C);
            return;
        }
        if (M == 1) {  /* C[0,:] = alpha * A[0,:] @ op(B) + beta * C[0,:] */
            int incx = ta == NoTrans ? 1 : lda;
            if (tb == Trans) gemv(NoTrans, N, K, alpha, B, ldb, A, incx, beta, C, 1, N);
            else gemv(Trans, K, N, alpha, B, ldb, A, incx, beta, C, 1, N);
            return;
        }
        if (N == 1) {  /* C[:,0] = alpha * op(A) @ B[:,0] + beta * C[:,0] */
            int incx = tb == NoTrans ? ldb : 1;
            if (ta == NoTrans) gemv(NoTrans, M, K, alpha, A, lda, B, incx, beta, C, ldc, M);
            else gemv(Trans, K, M, alpha, A, lda, B, incx, beta, C, ldc, M);
            return;
        }
        if (ta == NoTrans && tb == Trans && few_rows(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
            return;
    }
    real_gemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
"""


def is_macos() -> bool:
    return sys.platform == "darwin"


def is_apple_silicon() -> bool:
    """True on macOS running natively on arm64 (Metal is available to MLX)."""
    return is_macos() and _platform.machine() == "arm64"


def default_device() -> str:
    """"gpu" when MLX has a usable Metal device, else "cpu".

    Imports `mlx.core` when asked on Apple Silicon only; on other platforms the answer needs no
    import (and so does not spoil `ensure_fast_blas()`)."""
    if not is_apple_silicon():
        return "cpu"
    try:
        import mlx.core as mx

        return "gpu" if mx.metal.is_available() else "cpu"
    except Exception:
        return "cpu"


def default_dtype(device: str | None = None) -> str:
    """The dtype model weights are used in: "float32" on CPU (MLX's quantized and float16
    matmuls are several times slower than float32 on x86 CPUs), "quantized" on Metal (keep
    whatever the checkpoint has: quantized weights stay quantized)."""
    return "float32" if (device or default_device()) == "cpu" else "quantized"


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
    from onyx.assets import cache_dir

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
            for flags in (["-O3", "-march=native"], ["-O2"]):  # native vector width, else portable
                proc = subprocess.run([compiler, *flags, "-shared", "-fPIC", "-o", str(out), str(src), "-ldl"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
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
                    ctypes.CDLL(str(shim), mode=ctypes.RTLD_GLOBAL)  # before OpenBLAS: its sgemm wins
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


def blas_status() -> str:
    """One line saying which BLAS MLX's CPU backend uses in this process, and why."""
    if is_macos():
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
        extras.append("sgemm shim: x @ W^T with 1..8 rows -> streaming kernels" if _state["shim"] else "no sgemm shim")
        return f"OpenBLAS {_state['loaded']} ({'; '.join(extras)})"
    return f"MLX's bundled reference BLAS (slow): {_state['note']}"
