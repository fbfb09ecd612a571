#!/usr/bin/env python3
"""Few-row products x @ W^T: the BLAS shim's kernels against its previous version and OpenBLAS.

A decode step multiplies one row of activations by every weight matrix; verifying k - 1 drafts,
or decoding a batch of k requests, multiplies k rows. The weights stream from memory once per
call either way, so the figure of merit is the weight bandwidth: GB/s = bytes of W / time per
call. Rows k = 1, 2, 4, 5, 8, 12, 16, 24, 32 against SmolLM2-135M's weight shapes (W is N x K):

    q/o 576 x 576, k/v 192 x 576, gate/up 1536 x 576, down 576 x 1536, lm_head 49152 x 576

Variants, timed call by call in one interleaved loop (pairs share the machine's load):

    now       the shim as `onyx.cpu.blas` builds it (x @ W^T for 1..32 rows in its own kernels),
              on one thread
    split     the same, each product split between `onyx.cpu.blas.shim_threads()` threads (as
              Onyx runs it; timed by wall clock, compared with `now` by paired wall-time ratios);
              left out when that is one thread
    before    the shim as of commit BEFORE_REV (a one-row kernel, a 2..8-row kernel, OpenBLAS
              beyond 8 rows), built from `git show` with the same flags; left out without git
    openblas  OpenBLAS's cblas_sgemm

Every call reads a different copy of W from a pool larger than the caches (512 MB), as a decode
step does (the model's 540 MB of weights do not fit in them either). Time per call is the calling
thread's CPU time (this machine is shared: time spent descheduled does not count); wall times are
in the JSON too. Per (shape, k): median GB/s per variant, the median of the paired per-call ratios
now / before and now / openblas, now's bandwidth relative to the one-row kernels (now and before
at k = 1), and the arithmetic ceiling: k multiply-adds per weight float at the peak FMA rate
measured on one core here (4 bytes x peak / k).

    python bench/matmul_bench.py            # about 5 minutes
    python bench/matmul_bench.py --quick    # two shapes, k = 1, 4, 16, a small pool
    python bench/matmul_bench.py --before 029e840 --rows 8,9,12,33,64,256   # against another shim
    python bench/matmul_bench.py --before 99c97c2 --rows 64,256 --shape 512x64   # attention-sized K

Prints one table, writes matmul_bench.json and matmul_bench.png to --out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import ast  # noqa: E402
import ctypes  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

from onyx.cpu import blas  # noqa: E402

BEFORE_REV = "2953333"  # the last commit with the one-row + 2..8-row kernels
SHAPES = [("q/o", 576, 576), ("k/v", 192, 576), ("gate/up", 1536, 576), ("down", 576, 1536),
          ("lm_head", 49152, 576)]  # (name, N, K): W is N x K
ROWS = [1, 2, 4, 5, 8, 12, 16, 24, 32]
QUICK_SHAPES, QUICK_ROWS = ("q/o", "down"), [1, 4, 16]

# Timing loop and FMA peak, in C so that Python's call overhead stays out of the figures.
_TIMER_SOURCE = r"""
#include <time.h>
typedef void (*gemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                       float, float *, int);
static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* For each copy c of W in the pool, calls every variant once (in an order rotated with c, variant
   v on copy c + v * copies / nv so that no call finds W in the cache), and records each call's
   wall and thread-CPU seconds at [v * copies + c]. */
void time_calls(gemm_t *fs, int nv, int M, int N, int K, const float *A, const float *pool,
                long stride, int copies, float *C, double *wall, double *cpu) {
    for (int c = 0; c < copies; c++)
        for (int i = 0; i < nv; i++) {
            int v = (i + c) % nv;
            const float *W = pool + stride * ((c + (long)v * copies / nv) % copies);
            double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
            fs[v](101, 111, 112, M, N, K, 1.0f, A, K, W, K, 0.0f, C, N);
            cpu[(long)v * copies + c] = now(CLOCK_THREAD_CPUTIME_ID) - c0;
            wall[(long)v * copies + c] = now(CLOCK_MONOTONIC) - w0;
        }
}
#if defined(__AVX512F__)
typedef float vf __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float vf __attribute__((vector_size(32)));
#else
typedef float vf __attribute__((vector_size(16)));
#endif
/* Multiply-adds per second (float lanes) on the widest vectors, 12 independent chains. */
double fma_peak(long steps) {
    vf a[12], m;
    for (int l = 0; l < (int)(sizeof m / 4); l++) m[l] = 0.5f;
    _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = m * (float)i;
    double c0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (long s = 0; s < steps; s++) {
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = a[i] * m + m;
#if defined(__aarch64__)
        __asm__ volatile("" : "+w"(a[0]));
#else
        __asm__ volatile("" : "+x"(a[0]));
#endif
    }
    double dt = now(CLOCK_THREAD_CPUTIME_ID) - c0;
    float sink = 0;
    _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) sink += a[i][0];
    return sink == 12345.0f ? 0 : 12.0 * steps * (sizeof m / 4) / dt;
}
"""


def _compile(source: str, dest: Path, extra: list[str]) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler")
    src = dest.with_suffix(".c")
    src.write_text(source)
    subprocess.run([cc, "-O3", "-march=native", "-shared", "-fPIC", "-o", str(dest), str(src), *extra],
                   check=True, capture_output=True, timeout=300)
    return dest


def _shim_source_at(rev: str) -> str | None:
    """The shim's C source at git revision `rev` (`onyx/cpu/blas_shim.c`, or the `_SHIM_SOURCE`
    string of `onyx/platform.py` in revisions before it had a file of its own); None when there
    is no git or no such revision."""

    def show(path: str) -> str | None:
        try:
            return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=harness.ROOT, check=True,
                                  capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None

    source = show("onyx/cpu/blas_shim.c")
    if source is not None:
        return source
    text = show("onyx/platform.py")
    if text is None:
        return None
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_SHIM_SOURCE" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def _sgemm_of_shim(path: Path, library: str):
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    if lib.onyx_blas_shim_init(library.encode()) != 0:
        raise RuntimeError(f"{path} could not bind to {library}")
    return lib, ctypes.cast(lib.cblas_sgemm, ctypes.c_void_p).value


def variants(tmp: Path, before_rev: str = BEFORE_REV) -> tuple[dict, dict, list]:
    """{name: cblas_sgemm address}, notes, and the libraries to keep loaded."""
    library = blas.find_blas_library()
    if not sys.platform.startswith("linux") or library is None:
        raise SystemExit("this bench measures the Linux BLAS shim: needs Linux and OpenBLAS")
    shim = blas.build_shim()
    if shim is None:
        raise SystemExit("the shim could not be built (no C compiler?)")
    keep, fns, notes = [], {}, {"shim": str(shim), "blas": library}
    lib, fns["now"] = _sgemm_of_shim(shim, library)
    lib.onyx_blas_shim_threads(1)  # this process's own shim (MLX's): its kernels on one thread
    keep.append(lib)
    threads = blas.shim_threads()
    if threads > 1:  # a second copy of the library: its own helper threads and settings
        split = tmp / "shim_split.so"
        shutil.copyfile(shim, split)
        lib, fns["split"] = _sgemm_of_shim(split, library)
        lib.onyx_blas_shim_threads(threads)
        keep.append(lib)
        notes["split"] = f"the same kernels, each product split between {threads} threads (as Onyx runs them)"
    old = _shim_source_at(before_rev)
    if old is None:
        notes["before"] = f"left out: no git or no commit {before_rev}"
    else:
        lib, fns["before"] = _sgemm_of_shim(_compile(old, tmp / "shim_before.so", ["-ldl", "-pthread"]), library)
        if hasattr(lib, "onyx_blas_shim_threads"):
            lib.onyx_blas_shim_threads(1)  # one thread, as `now`
        keep.append(lib)
        notes["before"] = f"shim source at commit {before_rev}"
    ob = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)
    try:
        ob.openblas_set_num_threads(1)
    except AttributeError:
        pass
    fns["openblas"] = ctypes.cast(ob.cblas_sgemm, ctypes.c_void_p).value
    keep.append(ob)
    return fns, notes, keep


def check(fn_addr: int, m: int, n: int, k: int, rng) -> float:
    """Largest error of one product against numpy (float64), relative to the largest output."""
    proto = ctypes.CFUNCTYPE(None, *[ctypes.c_int] * 6, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                             ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    proto(fn_addr)(101, 111, 112, m, n, k, 1.0, x.ctypes.data, k, w.ctypes.data, k, 0.0, c.ctypes.data, n)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    return float(np.max(np.abs(c - want)) / np.max(np.abs(want)))


def run_shape(timer, fns: dict, name: str, n: int, k: int, rows: list[int], pool_mb: int, reps: int,
              verbose: bool) -> list[dict]:
    names = list(fns)
    arr = (ctypes.c_void_p * len(names))(*[fns[v] for v in names])
    copies = max(2, -(-pool_mb * 2**20 // (n * k * 4)))
    rng = np.random.default_rng(0)
    pool = np.empty((copies, n, k), np.float32)
    for i in range(copies):
        pool[i] = rng.random((n, k), dtype=np.float32) - 0.5
    x = (rng.random((max(rows), k), dtype=np.float32) - 0.5)
    out = np.empty((max(rows), n), np.float32)
    gb = n * k * 4 / 1e9
    results = []
    for m in rows:
        errs = {v: check(fns[v], m, min(n, 300), k, rng) for v in names}
        wall = np.empty((reps, len(names), copies))
        cpu = np.empty((reps, len(names), copies))
        for r in range(reps):
            w_, c_ = np.empty(len(names) * copies), np.empty(len(names) * copies)
            timer.time_calls(arr, len(names), m, n, k, x.ctypes.data, pool.ctypes.data, n * k, copies,
                             out.ctypes.data, w_.ctypes.data, c_.ctypes.data)
            wall[r], cpu[r] = w_.reshape(len(names), copies), c_.reshape(len(names), copies)
        row = {"shape": name, "N": n, "K": k, "k": m, "weight_mb": round(n * k * 4 / 1e6, 2), "copies": copies,
               "calls": reps * copies}
        for i, v in enumerate(names):
            row[f"{v}_gbs"] = round(gb / float(np.median(cpu[:, i])), 2)
            row[f"{v}_gbs_wall"] = round(gb / float(np.median(wall[:, i])), 2)
            row[f"{v}_us"] = round(1e6 * float(np.median(cpu[:, i])), 1)
            row[f"{v}_max_rel_err"] = errs[v]
        for v in names[1:]:  # paired per-call ratios: the two calls ran back to back
            if v != "split":
                row[f"now_over_{v}"] = round(float(np.median(cpu[:, names.index(v)] / cpu[:, 0])), 3)
        if "split" in names:  # two threads: only wall time says what the caller waited
            i = names.index("split")
            row["split_gbs"] = row["split_gbs_wall"]
            row["split_over_now_wall"] = round(float(np.median(wall[:, 0] / wall[:, i])), 3)
        results.append(row)
        if verbose:
            print(f"  {name:8} k={m:2}  " + "  ".join(f"{v} {row[f'{v}_gbs']:6.2f}" for v in names) + " GB/s",
                  flush=True)
    del pool
    return results


def add_references(rows: list[dict], peak_lanes_per_s: float) -> None:
    """now relative to the one-row kernels of the same shape, and the arithmetic ceiling."""
    ones = {r["shape"]: r for r in rows if r["k"] == 1}
    for r in rows:
        one = ones.get(r["shape"])
        if one:
            r["now_over_now_k1"] = round(r["now_gbs"] / one["now_gbs"], 3)
            if "before_gbs" in one:
                r["now_over_before_k1"] = round(r["now_gbs"] / one["before_gbs"], 3)
        r["fma_ceiling_gbs"] = round(4 * peak_lanes_per_s / r["k"] / 1e9, 1)


def print_table(rows: list[dict], have_before: bool, split: bool = False) -> None:
    head = ["shape (N x K)", "k", "now GB/s"] + (["before", "now/before"] if have_before else []) + \
           ["openblas", "now/openblas", "now / one-row now"] + (["now / one-row before"] if have_before else []) + \
           ["FMA ceiling", "now µs"] + (["split GB/s (wall)", "split / now (wall)"] if split else [])
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [f"{r['shape']} {r['N']}x{r['K']}", str(r["k"]), f"{r['now_gbs']:.1f}"]
        if have_before:
            cells += [f"{r['before_gbs']:.1f}", f"{r['now_over_before']:.2f}x"]
        ref = lambda key: f"{r[key]:.2f}" if key in r else "-"  # noqa: E731 - needs k = 1 in --rows
        cells += [f"{r['openblas_gbs']:.1f}", f"{r['now_over_openblas']:.2f}x", ref("now_over_now_k1")]
        if have_before:
            cells.append(ref("now_over_before_k1"))
        cells += [f"{r['fma_ceiling_gbs']:.0f}", f"{r['now_us']:.0f}"]
        if split:
            cells += [f"{r['split_gbs_wall']:.1f}", f"{r['split_over_now_wall']:.2f}x"]
        print("| " + " | ".join(cells) + " |")


def plot(res: dict, path: Path) -> bool:
    plt = harness.pyplot()
    if plt is None:
        return False
    shapes = list(dict.fromkeys(r["shape"] for r in res["rows"]))
    fig, axes = plt.subplots(1, len(shapes), figsize=(3.6 * len(shapes), 3.8), sharey=True, squeeze=False)
    for ax, s in zip(axes[0], shapes):
        rows = [r for r in res["rows"] if r["shape"] == s]
        ks = [r["k"] for r in rows]
        for v, style in (("now", "o-"), ("split", "D-"), ("before", "s--"), ("openblas", "^:")):
            if f"{v}_gbs" in rows[0]:
                ax.plot(ks, [r[f"{v}_gbs"] for r in rows], style, label=v)
        ax.plot(ks, [min(r["fma_ceiling_gbs"], 2 * max(r["now_gbs"] for r in rows)) for r in rows], "k-",
                lw=0.6, label="FMA ceiling")
        ax.set_title(f"{s} {rows[0]['N']}x{rows[0]['K']}", fontsize=9)
        ax.set_xlabel("rows k")
        ax.set_xticks(ks)
    axes[0][0].set_ylabel("weight GB/s (median; thread CPU time, split: wall)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"x @ W^T with k rows, load avg {res['meta']['loadavg_start']}", fontsize=10)
    harness.save_figure(fig, path)
    return True


def run(quick: bool = False, out_dir: Path | None = None, *, pool_mb: int | None = None, reps: int | None = None,
        verbose: bool = True, before_rev: str = BEFORE_REV, rows: list[int] | None = None,
        shapes: list[tuple[str, int, int]] | None = None) -> dict:
    out_dir = Path(out_dir) if out_dir is not None else harness.RESULTS
    pool_mb = pool_mb or (64 if quick else 512)
    reps = reps or (1 if quick else 3)
    shapes = shapes or [s for s in SHAPES if not quick or s[0] in QUICK_SHAPES]
    rows = rows or (QUICK_ROWS if quick else ROWS)
    flags = set(blas._cpu_flags().split())
    meta = {**harness.machine_meta(), "quick": quick, "loadavg_start": harness.loadavg(),
            "blas": blas.blas_status(), "pool_mb": pool_mb, "reps": reps, "before_rev": before_rev,
            "cpu_vector_flags": sorted(flags & {"avx", "avx2", "fma", "avx512f", "neon", "asimd"})}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        timer = ctypes.CDLL(str(_compile(_TIMER_SOURCE, tmp / "timer.so", [])))
        timer.fma_peak.restype = ctypes.c_double
        timer.fma_peak.argtypes = [ctypes.c_long]
        timer.time_calls.restype = None
        timer.time_calls.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        fns, notes, _keep = variants(tmp, before_rev)
        meta["variants"] = notes
        peak = max(timer.fma_peak(20_000_000 if not quick else 2_000_000) for _ in range(3))
        meta["fma_peak_glanes_per_s"] = round(peak / 1e9, 1)
        if verbose:
            print(f"load average {meta['loadavg_start']}; peak {peak / 1e9:.1f} G multiply-adds/s (float lanes, "
                  f"one core); variants: {', '.join(fns)}", flush=True)
        results = []
        for name, n, k in shapes:
            results += run_shape(timer, fns, name, n, k, rows, pool_mb, reps, verbose)
    add_references(results, peak)
    meta["loadavg_end"] = harness.loadavg()
    res = {"meta": meta, "rows": results,
           "note": "GB/s = weight bytes / median thread-CPU time per call; now_over_X = median of paired "
                   "per-call time ratios X / now (> 1: now is faster); fma_ceiling_gbs = 4 bytes x peak "
                   "multiply-adds per second / k; split: the same kernels with each product split between "
                   "threads, GB/s from wall time, split_over_now_wall = median of paired wall-time ratios "
                   "now / split (> 1: the split is faster)"}
    print_table(results, "before" in fns, "split" in fns)
    harness.save_results(out_dir, "matmul_bench", res, plot)
    return res


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "two shapes, k = 1, 4, 16, a 64 MB pool (smoke test)")
    ap.add_argument("--pool-mb", type=int, default=None, help="weight copies per shape, in MB (default 512)")
    ap.add_argument("--reps", type=int, default=None, help="passes over the pool per (shape, k) (default 3)")
    ap.add_argument("--before", default=BEFORE_REV, help=f"revision of the `before` shim (default {BEFORE_REV})")
    ap.add_argument("--rows", default=None, help="comma-separated k (default 1,2,4,5,8,12,16,24,32)")
    ap.add_argument("--shape", action="append", default=None,
                    help="NxK of W instead of SmolLM2's shapes (repeatable), e.g. 512x64")
    a = ap.parse_args(argv)
    rows = [int(r) for r in a.rows.split(",")] if a.rows else None
    shapes = [(w, *map(int, w.split("x"))) for w in a.shape] if a.shape else None
    run(a.quick, a.out, pool_mb=a.pool_mb, reps=a.reps, before_rev=a.before, rows=rows, shapes=shapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
