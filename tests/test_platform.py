"""Platform choices made at run time: the device, OpenBLAS and the BLAS shim on Linux, and
products through whatever BLAS is in use."""

from __future__ import annotations

import sys

import numpy as np

from onyx import platform

import mlx.core as mx  # noqa: E402  (after onyx.platform: OpenBLAS is preloaded first)


def test_platform_choices_and_blas():
    status = platform.blas_status()
    assert isinstance(status, str) and status
    if sys.platform == "darwin":
        assert platform.ensure_fast_blas() is False
    else:
        assert platform.default_device() == "cpu" and not platform.is_apple_silicon()
        if platform.find_blas_library() and "OpenBLAS" in status:
            assert platform.ensure_fast_blas() is True
    # Whatever BLAS (and shim) is in use, one-row, one-column and few-row products (the shim's
    # own kernels: 1..8 rows, any K and N, with tails) must be right, transposed or not, with
    # beta = 0 on uninitialised outputs and with alpha/beta.
    rng = np.random.default_rng(0)
    for m, n, k in [(1, 300, 70), (1, 130, 1541), (300, 1, 70), (1, 1, 9), (5, 6, 7), (2, 300, 70), (8, 130, 17),
                    (3, 64, 576), (7, 1000, 8), (9, 40, 33)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        for A in (mx.array(a), mx.array(np.ascontiguousarray(a.T)).T):
            for B in (mx.array(b), mx.array(np.ascontiguousarray(b.T)).T):
                np.testing.assert_allclose(np.array(A @ B), a @ b, rtol=1e-4, atol=1e-4)
                np.testing.assert_allclose(np.array(mx.addmm(mx.array(c), A, B, alpha=0.5, beta=2.0)),
                                           0.5 * (a @ b) + 2 * c, rtol=1e-4, atol=1e-4)
        wide = mx.array(np.concatenate([a, rng.standard_normal((m, 5)).astype(np.float32)], axis=1))
        np.testing.assert_allclose(np.array(wide[:, :k] @ mx.array(np.ascontiguousarray(b.T)).T), a @ b,
                                   rtol=1e-4, atol=1e-4)  # a row stride larger than K


def test_default_dtype_follows_the_device():
    assert platform.default_dtype("cpu") == "float32" and platform.default_dtype("gpu") == "quantized"
    if sys.platform != "darwin":
        assert platform.default_device() == "cpu"
