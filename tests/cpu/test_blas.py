"""Platform choices made at run time: the device, OpenBLAS and the BLAS shim on Linux, and
products through whatever BLAS is in use."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
import time

import numpy as np
import pytest

from onyx.cpu import blas
from onyx.models import device

import mlx.core as mx  # noqa: E402  (after onyx.cpu.blas: OpenBLAS is preloaded first)

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def test_platform_choices_and_blas():
    status = blas.blas_status()
    assert isinstance(status, str) and status
    if sys.platform == "darwin":
        assert blas.ensure_fast_blas() is False
    else:
        assert device.default_device() == "cpu" and not device.is_apple_silicon()
        if blas.find_blas_library() and "OpenBLAS" in status:
            assert blas.ensure_fast_blas() is True
            if (shutil.which("cc") or shutil.which("gcc")) and not os.environ.get("ONYX_BLAS_SHIM") \
                    and not os.environ.get("LD_PRELOAD"):
                # a compiler is here, so the shim must have built: a source that does not
                # compile would otherwise only skip the shim's tests
                assert blas._state["shim"] and blas.shim_library() is not None, status
    # Whatever BLAS (and shim) is in use, one-row, one-column and few-row products (the shim's
    # own kernels: 1..512 rows, past 32 in pieces, any K and N, with tails; 513 rows go to
    # OpenBLAS) must be right,
    # transposed or not, and with alpha/beta.
    rng = np.random.default_rng(0)
    for m, n, k in [(1, 300, 70), (1, 130, 1541), (300, 1, 70), (1, 1, 9), (5, 6, 7), (2, 300, 70), (8, 130, 17),
                    (3, 64, 576), (7, 1000, 8), (9, 40, 33), (12, 67, 700), (16, 130, 1541), (17, 40, 33),
                    (25, 70, 640), (32, 130, 1541), (33, 40, 33), (70, 130, 576), (513, 40, 33)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        for A in (mx.array(a), mx.array(np.ascontiguousarray(a.T)).T):
            for B in (mx.array(b), mx.array(np.ascontiguousarray(b.T)).T):
                np.testing.assert_allclose(np.array(A @ B), a @ b, rtol=1e-4, atol=1e-3)
                np.testing.assert_allclose(np.array(mx.addmm(mx.array(c), A, B, alpha=0.5, beta=2.0)),
                                           0.5 * (a @ b) + 2 * c, rtol=1e-4, atol=1e-3)
        wide = mx.array(np.concatenate([a, rng.standard_normal((m, 5)).astype(np.float32)], axis=1))
        np.testing.assert_allclose(np.array(wide[:, :k] @ mx.array(np.ascontiguousarray(b.T)).T), a @ b,
                                   rtol=1e-4, atol=1e-3)  # a row stride larger than K


@pytest.mark.skipif(not sys.platform.startswith("linux") or blas.find_blas_library() is None, reason="Linux with OpenBLAS")
def test_importing_the_grammar_core_loads_no_blas():
    # Another engine (vLLM, transformers) imports Onyx's grammar core: its process must keep its
    # own libraries. The preload happens with the first part of Onyx that runs MLX.
    import subprocess

    lib = os.path.realpath(blas.find_blas_library())
    code = ("import os, sys, onyx, onyx.grammar.constraint, onyx.integrations.common\n"
            "def loaded(): return any(os.path.realpath(l.split()[-1]) == {lib!r} for l in open('/proc/self/maps') if '/' in l)\n"
            "print(loaded(), any(m == 'mlx' or m.startswith(('mlx.', 'onyx.cpu')) for m in sys.modules))\n"
            "import onyx.decoding\n"
            "print(loaded())\n").format(lib=lib)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "False", "True"], out.stdout + out.stderr


def test_default_dtype_follows_the_device():
    assert device.default_dtype("cpu") == "quantized" and device.default_dtype("gpu") == "quantized"
    if sys.platform != "darwin":
        assert device.default_device() == "cpu"


# --------------------------------------------------------------------------------------------
# The shim's x @ W^T kernels, called directly (every stride, alpha and beta under control)
# --------------------------------------------------------------------------------------------

needs_shim = pytest.mark.skipif(not (sys.platform.startswith("linux") and blas._state["shim"]),
                                reason="the BLAS shim is built on Linux with OpenBLAS and a C compiler only")


def _shim_lib():
    lib = ctypes.CDLL(str(blas.build_shim()), mode=ctypes.RTLD_LOCAL)
    assert lib.onyx_blas_shim_init(blas.find_blas_library().encode()) == 0
    return lib


def _shim_sgemm():
    f = _shim_lib().cblas_sgemm
    f.restype = None
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    return f


def _x_wt(sgemm, x, w, c, alpha=1.0, beta=0.0):
    """c = alpha * x @ w.T + beta * c through the shim; x, w, c may be row-strided views."""
    (m, k), n = x.shape, w.shape[0]
    for arr in (x, w, c):
        assert arr.dtype == np.float32 and arr.strides[1] == 4
    sgemm(ROW_MAJOR, NO_TRANS, TRANS, m, n, k, alpha, x.ctypes.data, x.strides[0] // 4, w.ctypes.data,
          w.strides[0] // 4, beta, c.ctypes.data, c.strides[0] // 4)
    return c


def _strided(rng, rows, cols, pad):
    """A rows x cols float32 view whose row stride is cols + pad."""
    return rng.standard_normal((rows, cols + pad)).astype(np.float32)[:, :cols]


# K: below one vector, odd tails, one block (<= 640), split into blocks with and without a tail.
# N: below a tile (leftover rows), odd, several tiles.
SHAPES = [(n, k) for k in (1, 7, 16, 17, 70, 576, 641, 1300, 1541) for n in (1, 3, 5, 66)]


@needs_shim
def test_shim_matches_numpy_for_1_to_512_rows_strides_tails_alpha_beta():
    sgemm, rng = _shim_sgemm(), np.random.default_rng(1)
    for m in [*range(1, 34), 47, 64, 65, 97, 512]:  # past 32 rows: pieces of at most 32
        for n, k in SHAPES:
            x, w = _strided(rng, m, k, 3), _strided(rng, n, k, 5)
            want = x.astype(np.float64) @ w.astype(np.float64).T
            tol = 1e-5 * np.sqrt(k) * (1 + np.abs(want))
            c = np.full((m, n + 2), np.nan, np.float32)[:, :n]  # beta = 0: C is never read
            got = _x_wt(sgemm, x, w, c)
            assert np.all(np.abs(got - want) <= tol), (m, n, k)
            c0 = _strided(rng, m, n, 2)
            got = _x_wt(sgemm, x, w, c0.copy(), alpha=0.5, beta=-2.0)
            assert np.all(np.abs(got - (0.5 * want - 2.0 * c0)) <= tol + 1e-5 * np.abs(c0)), (m, n, k)


@needs_shim
def test_shim_gives_a_row_the_same_bits_whatever_rows_share_the_call():
    # Verifying drafts (and batching, and prompt chunks) must reproduce the decode step's logits
    # exactly: every output is summed in the same order whatever M is.
    sgemm, rng = _shim_sgemm(), np.random.default_rng(2)
    for n, k in [(130, 576), (67, 1541), (9, 33), (5, 1300)]:
        w = _strided(rng, n, k, 4)
        x = _strided(rng, 100, k, 1)
        alone = np.stack([_x_wt(sgemm, x[i:i + 1], w, np.empty((1, n), np.float32))[0] for i in range(100)])
        # past 32 rows, pieces for weight-sized K only (K = 33 goes to OpenBLAS there)
        for m in [*range(2, 33)] + ([33, 39, 64, 65, 99, 100] if k >= 256 else []):
            together = _x_wt(sgemm, x[:m], w, np.empty((m, n), np.float32))
            assert np.array_equal(together, alone[:m]), (m, n, k)


@needs_shim
def test_mlx_products_go_through_the_shim_bit_for_bit():
    # MLX's x @ W.T for 1..512 rows of a weight-sized K reaches the shim (so a row's weight
    # products do not depend on how many tokens a forward carries: a decode step, a
    # verification, a prompt chunk); 513 rows are only checked for the right values.
    sgemm, rng = _shim_sgemm(), np.random.default_rng(3)
    w = rng.standard_normal((192, 576)).astype(np.float32)
    x = rng.standard_normal((513, 576)).astype(np.float32)
    W = mx.array(w)
    alone = _x_wt(sgemm, x[:1], w, np.empty((1, 192), np.float32))
    for m in (1, 2, 5, 8, 16, 17, 32, 33, 70, 256, 512):
        got = np.array(mx.array(x[:m]) @ W.T)
        assert np.array_equal(got, _x_wt(sgemm, x[:m], w, np.empty((m, 192), np.float32))), m
        assert np.array_equal(got[:1], alone), m
    got513 = np.array(mx.array(x) @ W.T)
    np.testing.assert_allclose(got513, x @ w.T, rtol=1e-4, atol=1e-3)


def _x_v(sgemm, x, v, c, alpha=1.0, beta=0.0):
    """c = alpha * x @ v + beta * c through the shim (v not transposed: K x N)."""
    (m, k), n = x.shape, v.shape[1]
    sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, alpha, x.ctypes.data, x.strides[0] // 4, v.ctypes.data,
          v.strides[0] // 4, beta, c.ctypes.data, c.strides[0] // 4)
    return c


@needs_shim
def test_attention_values_product_matches_numpy_and_a_row_keeps_its_bits():
    # x @ V (probabilities times values): 1..128 rows in the shim's own kernel (pieces of 32),
    # every width it takes (one vector to 256 floats, whole tiles and a tile's tail), K across
    # several blocks, strides, alpha and beta; a row's bits do not depend on the rows beside it.
    # Widths it does not take (not whole vectors, past 256) and more rows go to OpenBLAS and must
    # still be right.
    sgemm, rng = _shim_sgemm(), np.random.default_rng(6)
    for n in (16, 48, 64, 80, 128, 256, 30, 320):
        for k in (1, 5, 96, 97, 700, 2401):
            v = _strided(rng, k, n, 3)
            x = rng.random((130, k + 2), dtype=np.float32)[:, :k]
            want = x.astype(np.float64) @ v.astype(np.float64)
            tol = 2e-6 * k * (1 + np.abs(want))
            alone = np.stack([_x_v(sgemm, x[i:i + 1], v, np.empty((1, n), np.float32))[0] for i in range(128)])
            assert np.all(np.abs(alone - want[:128]) <= tol[:128]), (n, k)
            for m in (2, 3, 7, 12, 15, 32, 33, 40, 64, 97, 128, 129, 130):
                c = np.full((m, n + 1), np.nan, np.float32)[:, :n]  # beta = 0: C is never read
                got = _x_v(sgemm, x[:m], v, c)
                assert np.all(np.abs(got - want[:m]) <= tol[:m]), (m, n, k)
                if m <= 128 and n % 16 == 0 and n <= 256:
                    assert np.array_equal(got, alone[:m]), (m, n, k)
            c0 = rng.standard_normal((5, n)).astype(np.float32)
            got = _x_v(sgemm, x[:5], v, c0.copy(), alpha=0.5, beta=-2.0)
            assert np.all(np.abs(got - (0.5 * want[:5] - 2.0 * c0)) <= tol[:5] + 1e-5 * np.abs(c0)), (n, k)
    # through MLX: attention's p @ v for a decode step and a verification of drafts
    p = mx.softmax(mx.array(rng.standard_normal((1, 3, 15, 700)).astype(np.float32)), axis=-1)
    vals = mx.array(rng.standard_normal((1, 3, 700, 64)).astype(np.float32))
    together = np.array(p @ vals)
    for g in range(3):
        alone = _x_v(sgemm, np.array(p[0, g, :3]), np.array(vals[0, g]), np.empty((3, 64), np.float32))
        assert np.array_equal(together[0, g, :3], alone)


def _split_stats(lib) -> list[int]:
    out = (ctypes.c_long * 5)()
    lib.onyx_blas_shim_stats(out)
    return list(out)  # split products, chunks the caller ran, chunks in all, stalls, solo products


@needs_shim
def test_a_product_split_between_threads_has_the_same_bits_as_one_thread():
    # Shapes past the split threshold: chunks of weight rows, a last chunk that is not full, a
    # tail of N below a tile, K one block and K split into blocks; the helper thread must have
    # run chunks of its own (retried until it has: on a busy machine it may come late).
    lib, sgemm, rng = _shim_lib(), _shim_sgemm(), np.random.default_rng(4)
    shapes = [(1537, 576), (583, 1541), (4099, 70)]
    ws = {s: _strided(rng, *s, 3) for s in shapes}
    xs = {s: _strided(rng, 32, s[1], 1) for s in shapes}
    try:
        lib.onyx_blas_shim_threads(1)
        alone = {(s, m): _x_wt(sgemm, xs[s][:m], ws[s], np.empty((m, s[0]), np.float32))
                 for s in shapes for m in (1, 2, 7, 16, 32)}
        lib.onyx_blas_shim_threads(2)
        before = _split_stats(lib)
        for attempt in range(200):
            for (s, m), want in alone.items():
                got = _x_wt(sgemm, xs[s][:m], ws[s], np.full((m + 1, s[0]), np.nan, np.float32)[:m])
                assert np.array_equal(got, want), (s, m)
            after = _split_stats(lib)
            helper_chunks = (after[2] - before[2]) - (after[1] - before[1])
            if helper_chunks > 0:
                break
        assert after[0] > before[0], "no product was split"
        assert helper_chunks > 0, "the helper thread never ran a chunk"
    finally:
        lib.onyx_blas_shim_threads(blas.shim_threads())


@needs_shim
def test_a_forked_child_splits_products_with_its_own_helper():
    # The helpers do not survive fork; the child must neither hang nor reuse the parent's job.
    lib, sgemm, rng = _shim_lib(), _shim_sgemm(), np.random.default_rng(5)
    w, x = _strided(rng, 2049, 576, 0), _strided(rng, 8, 576, 0)
    lib.onyx_blas_shim_threads(2)
    try:
        want = _x_wt(sgemm, x, w, np.empty((8, 2049), np.float32))
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 when every product is right
            ok = all(np.array_equal(_x_wt(sgemm, x, w, np.empty((8, 2049), np.float32)), want) for _ in range(50))
            os._exit(0 if ok else 1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung in a split product")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        lib.onyx_blas_shim_threads(blas.shim_threads())


def test_shim_threads_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ONYX_SHIM_THREADS", "1")
    assert blas.shim_threads() == 1
    monkeypatch.setenv("ONYX_SHIM_THREADS", "3")
    assert blas.shim_threads() == 3
    monkeypatch.delenv("ONYX_SHIM_THREADS")
    assert blas.shim_threads() == min(2, len(os.sched_getaffinity(0)))
    monkeypatch.setenv("ONYX_SHIM_THREADS", "many")
    assert blas.shim_threads() == min(2, len(os.sched_getaffinity(0)))
