#!/usr/bin/env python3
"""Quantized weights on the CPU: one stream's decode against its memory-bandwidth floor.

The default model (SmolLM2-135M-Instruct, Q4_1 GGUF: 4-bit layers, an 8-bit embedding that is
also the output head) is loaded twice, as Onyx loads it (`dtype="quantized"`: the shim
multiplies the packed weights) and with every weight dequantized to float32 (`dtype="float32"`,
the CPU path before). Measured, in one run:

- bytes per token: what one decode step's products read, the weights of every Linear and of
  the tied output head (packed values, scales and biases for quantized ones);
- bandwidth: what the shim's one-row float kernel streams from memory (x @ W^T over a pool of
  float32 matrices larger than the caches, on the threads Onyx uses), and the same for the
  quantized kernel over a pool of 4-bit matrices (GB/s of packed bytes);
- the floor: bytes per token / bandwidth, the time a token's weights take to arrive;
- decode: greedy decoding of one stream (`greedy_generate`, 128 tokens after a warm-up, the
  time of a short run subtracted so the prompt does not count), both loads in turn, repeated;
  per load the median ms/token, the floor / decode fraction, and the paired speed-up;
- products by row count (k = 1, 4, 8, 16) for the head's and an MLP's shapes, quantized against
  float32 with the same weights, from pools larger than the caches.

    python bench/quant_bench.py            # about 3 minutes
    python bench/quant_bench.py --quick    # fewer repetitions

Prints one table, writes quant_bench.json to --out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import time  # noqa: E402

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402

from onyx.cpu import blas  # noqa: E402
from onyx.cpu.quant import CpuQuantizedLinear, is_shim_quantized  # noqa: E402
from onyx.models.loader import greedy_generate, load  # noqa: E402

POOL_BYTES = 512 << 20  # larger than the caches
PROMPT = "Write a short poem about the sea."


def product_bytes(loaded) -> int:
    """Bytes one decode step's weight products read (every Linear, and the embedding when it
    is the output head)."""
    model = loaded.model
    tied = bool(getattr(getattr(model, "args", None), "tie_word_embeddings", False))
    total = 0
    for path, m in model.named_modules():
        is_head = path.endswith("embed_tokens") and tied
        if is_shim_quantized(m) and (isinstance(m, CpuQuantizedLinear) or is_head):
            total += m.weight.nbytes + m.scales.nbytes + m.biases.nbytes
        elif isinstance(m, nn.Linear) or (isinstance(m, nn.Embedding) and is_head):
            total += m.weight.nbytes
    return total


def stream_gbs(make, row_bytes: int, reps: int) -> float:
    """GB/s of one-row products over a pool of matrices built by `make(i)` (each `row_bytes` x
    rows), best of `reps` passes over the pool."""
    pool = []
    while len(pool) * row_bytes < POOL_BYTES:
        pool.append(make(len(pool)))
    x = mx.random.normal((1, 576), key=mx.random.key(0))
    mx.eval(x)
    best = 0.0
    for _ in range(reps):
        start = time.perf_counter()
        for f in pool:
            mx.eval(f(x))
        best = max(best, len(pool) * row_bytes / (time.perf_counter() - start) / 1e9)
    return best


def float_matrix(i: int, n: int = 16384):
    w = mx.random.normal((n, 576), key=mx.random.key(i))
    mx.eval(w)
    return lambda x: x @ w.T


def quant_matrix(i: int, n: int = 16384, bits: int = 4):
    q = nn.QuantizedLinear(576, n, bias=False, group_size=32, bits=bits)
    q.weight, q.scales, q.biases = mx.quantize(mx.random.normal((n, 576), key=mx.random.key(i)) * 0.05,
                                               group_size=32, bits=bits)
    q.scales, q.biases = q.scales.astype(mx.float16), q.biases.astype(mx.float16)
    return CpuQuantizedLinear(q, blas.shim_library())


def decode_ms(loaded, ids: list[int], tokens: int) -> float:
    """ms per decoded token of one greedy stream (the prompt's time subtracted)."""
    start = time.perf_counter()
    greedy_generate(loaded, ids, 8, stop_at_eos=False)
    short = time.perf_counter() - start
    start = time.perf_counter()
    greedy_generate(loaded, ids, tokens + 8, stop_at_eos=False)
    return (time.perf_counter() - start - short) / tokens * 1e3


def products(quick: bool) -> list[dict]:
    """Quantized against float32 products by row count, paired call by call."""
    out = []
    for name, n, k in (("lm_head", 49152, 576), ("up_proj", 1536, 576)):
        copies = max(2, POOL_BYTES // (n * k * 4)) if not quick else 2
        dense, quant = [], []
        for i in range(copies):
            q = nn.QuantizedLinear(k, n, bias=False, group_size=32, bits=4)
            q.weight, q.scales, q.biases = mx.quantize(mx.random.normal((n, k), key=mx.random.key(i)) * 0.05,
                                                       group_size=32, bits=4)
            q.scales, q.biases = q.scales.astype(mx.float16), q.biases.astype(mx.float16)
            w = mx.dequantize(q.weight, q.scales, q.biases, group_size=32, bits=4).astype(mx.float32)
            mx.eval(w)
            dense.append(w)
            quant.append(CpuQuantizedLinear(q, blas.shim_library()))
        for rows in (1, 4, 8, 16):
            x = mx.random.normal((rows, k), key=mx.random.key(rows))
            mx.eval(x)
            t_dense, t_quant = [], []
            for rep in range(6 if quick else 20):
                i = rep % copies
                start = time.perf_counter()
                mx.eval(x @ dense[i].T)
                t_dense.append(time.perf_counter() - start)
                start = time.perf_counter()
                mx.eval(quant[i](x))
                t_quant.append(time.perf_counter() - start)
            out.append({"shape": name, "n": n, "k": k, "rows": rows,
                        "float32_us": harness.median(t_dense) * 1e6, "quantized_us": harness.median(t_quant) * 1e6,
                        "speedup": harness.median(harness.paired_ratios(t_dense, t_quant))})
    return out


def main() -> int:
    args = harness.arg_parser(__doc__, "fewer repetitions").parse_args()
    harness.start_like_a_server()
    if blas.shim_library() is None:
        print("quant_bench: the BLAS shim is not loaded in this process (Linux with a C compiler only)")
        return 1
    reps = 2 if args.quick else 5
    quantized, dense = load(), load(dtype="float32")
    ids = quantized.encode(PROMPT)
    tokens = 48 if args.quick else 128
    fbw = stream_gbs(float_matrix, 16384 * 576 * 4, 2 if args.quick else 3)
    qbw = stream_gbs(quant_matrix, 16384 * 576 // 2 + 16384 * 18 * 4, 2 if args.quick else 3)
    nbytes = {"quantized": product_bytes(quantized), "float32": product_bytes(dense)}
    runs = {"quantized": [], "float32": []}
    for name, loaded in (("quantized", quantized), ("float32", dense)):
        decode_ms(loaded, ids, 16)  # warm-up
    for _ in range(reps):
        for name, loaded in (("quantized", quantized), ("float32", dense)):
            runs[name].append(decode_ms(loaded, ids, tokens))
    same = (greedy_generate(quantized, ids, 64, stop_at_eos=False)
            == greedy_generate(dense, ids, 64, stop_at_eos=False))
    loads = {}
    for name in runs:
        floor = nbytes[name] / (fbw * 1e9) * 1e3
        ms = harness.median(runs[name])
        loads[name] = {"dtype": (quantized if name == "quantized" else dense).dtype, "bytes_per_token": nbytes[name],
                       "floor_ms": floor, "decode_ms": ms, "decode_runs_ms": runs[name], "floor_fraction": floor / ms}
    prods = products(args.quick)
    data = {"bench": "quant", "meta": harness.machine_meta(), "shim_threads": blas.shim_threads(),
            "float_stream_gbs": fbw, "quant_stream_gbs": qbw, "loads": loads,
            "decode_speedup": harness.median(harness.paired_ratios(runs["float32"], runs["quantized"])),
            "same_greedy_64": same, "products": prods}
    print(f"bandwidth (one-row float kernel, {blas.shim_threads()} threads): {fbw:.1f} GB/s; "
          f"quantized kernel: {qbw:.1f} GB/s of packed bytes")
    print(f"{'load':<10} {'dtype':<15} {'MB/token':>9} {'floor ms':>9} {'decode ms':>10} {'floor/decode':>13}")
    for name, r in loads.items():
        print(f"{name:<10} {r['dtype']:<15} {r['bytes_per_token'] / 1e6:>9.1f} {r['floor_ms']:>9.2f} "
              f"{r['decode_ms']:>10.2f} {r['floor_fraction']:>13.2f}")
    print(f"decode speed-up (paired float32 / quantized): {data['decode_speedup']:.2f}x; "
          f"same greedy tokens over 64: {same}")
    print(f"\n{'shape':<8} {'rows':>4} {'float32 us':>11} {'quantized us':>13} {'speed-up':>9}")
    for p in prods:
        print(f"{p['shape']:<8} {p['rows']:>4} {p['float32_us']:>11.0f} {p['quantized_us']:>13.0f} {p['speedup']:>9.2f}")
    harness.save_results(harness.out_dir(args.out), "quant_bench", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
