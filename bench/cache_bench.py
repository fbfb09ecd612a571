"""Paged KV cache benchmark: rollback time vs sequence length, and decode speed of the paged cache
against mlx-lm's own KVCache on the same model in the same run.

    python bench/cache_bench.py                    # random SmolLM2-135M-shaped model (float32)
    python bench/cache_bench.py --real             # the real default model (onyx.models.loader.load())
    python bench/cache_bench.py --quick            # fewer steps / lengths

Prints tables and writes cache_bench.json (one entry per model) to --out (default
bench/results). Decode steps of the two caches are interleaved (mlx-lm, paged, paged, mlx-lm,
...) so both see the same machine load; the numbers to read are the ratios (paged / mlx-lm), not
the absolute times. `run_cache_bench()` is the same thing as a function (for
bench/runtime_bench.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import mlx.core as mx  # noqa: E402

from onyx.kv.pool import PagedKVPool  # noqa: E402


def random_smollm2(num_layers: int = 30, seed: int = 0):
    """A randomly initialised llama with SmolLM2-135M's shapes (hidden 576, 9 heads / 3 KV heads,
    head_dim 64, MLP 1536, vocab 49152), float32."""
    from mlx_lm.models import llama

    args = llama.ModelArgs(model_type="llama", hidden_size=576, num_hidden_layers=num_layers,
                           intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                           rms_norm_eps=1e-5, vocab_size=49152, rope_theta=1e5,
                           tie_word_embeddings=True)
    mx.random.seed(seed)
    model = llama.Model(args)
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


def _median_us(xs):
    return 1e6 * statistics.median(xs)


def bench_rollback(pool_factory, lengths, *, rollback_tokens=(1, 8, 24), repeats=200):
    """Rollback time vs length. The sequence is filled with synthetic K/V written through the
    layer caches (what a model would write); each timed rollback is followed by an untimed
    re-append of the same number of tokens."""
    from mlx_lm.models.cache import KVCache, trim_prompt_cache

    rows = []
    for length in lengths:
        pool = pool_factory()
        seq = pool.sequence()
        caches = seq.layer_caches()
        mlx_caches = [KVCache() for _ in caches]
        for l, (c, mc) in enumerate(zip(caches, mlx_caches)):
            h, d = pool.kv_heads[l], pool.head_dims[l]
            kv = mx.random.normal((1, h, length, d)).astype(pool.dtype)
            c.update_and_fetch(kv, kv)
            mc.update_and_fetch(kv, kv)
        mx.eval([c.state for c in caches] + [mc.state for mc in mlx_caches])
        row = {"length": length}
        for k in rollback_tokens:
            extra = [mx.random.normal((1, pool.kv_heads[l], k, pool.head_dims[l])).astype(pool.dtype)
                     for l in range(pool.num_layers)]
            mx.eval(extra)
            times, mtimes, freed = [], [], []
            for _ in range(repeats):
                used = pool.num_used_blocks
                t0 = time.perf_counter()
                seq.rollback(k)
                times.append(time.perf_counter() - t0)
                freed.append(used - pool.num_used_blocks)
                t0 = time.perf_counter()
                trim_prompt_cache(mlx_caches, k)
                mtimes.append(time.perf_counter() - t0)
                outs = []
                for l, (c, mc) in enumerate(zip(caches, mlx_caches)):
                    outs += list(c.update_and_fetch(extra[l], extra[l]))
                    outs += list(mc.update_and_fetch(extra[l], extra[l]))
                mx.eval(outs)
            row[f"rollback_{k}_us"] = round(_median_us(times), 2)
            row[f"mlx_trim_{k}_us"] = round(_median_us(mtimes), 2)
            row[f"rollback_{k}_max_blocks_freed"] = max(freed)
        rows.append(row)
        seq.free()
    return rows


def bench_decode(model, *, prompt_len=16, steps=128, block_size=16, seed=0):
    """Greedy decode with both caches, one step each in turn (order alternating). Returns the
    per-cache median step time, tok/s and the ratios; checks the greedy tokens agree."""
    from mlx_lm.models.cache import make_prompt_cache

    vocab = model.args.vocab_size if hasattr(model, "args") else 1000
    mx.random.seed(seed)
    prompt = mx.random.randint(0, vocab, (prompt_len,)).tolist()
    pool = PagedKVPool.for_model(model, block_size=block_size,
                                 num_blocks=-(-(prompt_len + steps + 8) // block_size))
    seq = pool.sequence()
    caches = {"mlx_lm": make_prompt_cache(model), "paged": seq.layer_caches()}
    y, times, tokens = {}, {k: [] for k in caches}, {k: [] for k in caches}
    for name, c in caches.items():
        y[name] = mx.argmax(model(mx.array(prompt)[None], cache=c)[:, -1], axis=-1)
        mx.eval(y[name])
    # warm-up steps (not timed), then interleave
    order = ["mlx_lm", "paged"]
    for i in range(steps + 4):
        for name in order:
            c = caches[name]
            t0 = time.perf_counter()
            y[name] = mx.argmax(model(y[name][:, None], cache=c)[:, -1], axis=-1)
            mx.eval(y[name])
            dt = time.perf_counter() - t0
            if i >= 4:
                times[name].append(dt)
                tokens[name].append(int(y[name].item()))
        order.reverse()
    ratios = harness.paired_ratios(times["paged"], times["mlx_lm"])
    out = {"prompt_len": prompt_len, "steps": steps, "block_size": block_size}
    for name in caches:
        med = statistics.median(times[name])
        out[f"{name}_median_step_ms"] = round(1e3 * med, 3)
        out[f"{name}_tok_per_s"] = round(1.0 / med, 3)
        out[f"{name}_total_s"] = round(sum(times[name]), 3)
    out["tok_per_s_ratio_paged_over_mlx"] = round(out["paged_tok_per_s"] / out["mlx_lm_tok_per_s"], 4)
    out["median_paired_step_time_ratio"] = round(statistics.median(ratios), 4)
    out["total_time_ratio"] = round(out["paged_total_s"] / out["mlx_lm_total_s"], 4)
    out["same_tokens"] = tokens["paged"] == tokens["mlx_lm"]
    seq.free()
    return out


def bench_prefix_reuse(model, *, system_len=256, question_len=16, repeats=3, block_size=16):
    """Time to first logits for a prompt whose first system_len tokens a previous request
    registered, against computing the whole prompt; checks the logits agree."""
    vocab = model.args.vocab_size if hasattr(model, "args") else 1000
    mx.random.seed(1)
    system = mx.random.randint(0, vocab, (system_len,)).tolist()
    pool = PagedKVPool.for_model(model, block_size=block_size)
    first = pool.sequence()
    mx.eval(model(mx.array(system + [1] * question_len)[None], cache=first.layer_caches()))
    pool.register_prefix(system, first)
    first.free()
    full_t, reuse_t, diffs = [], [], []
    for r in range(repeats):
        prompt = system + mx.random.randint(0, vocab, (question_len,)).tolist()
        t0 = time.perf_counter()
        seq = pool.sequence()
        ref = model(mx.array(prompt)[None], cache=seq.layer_caches())[0, -1]
        mx.eval(ref)
        full_t.append(time.perf_counter() - t0)
        seq.free()
        t0 = time.perf_counter()
        seq, n = pool.lookup_prefix(prompt)
        out = model(mx.array(prompt[n:])[None], cache=seq.layer_caches())[0, -1]
        mx.eval(out)
        reuse_t.append(time.perf_counter() - t0)
        seq.free()
        diffs.append(float(mx.abs(out - ref).max()))
    full, reuse = statistics.median(full_t), statistics.median(reuse_t)
    return {"system_len": system_len, "question_len": question_len, "cached_tokens": n,
            "full_prefill_ms": round(1e3 * full, 2), "prefix_reuse_ms": round(1e3 * reuse, 2),
            "speedup": round(full / reuse, 2), "max_abs_logit_diff": max(diffs)}


def run_cache_bench(model=None, *, model_name=None, quick=False, decode_configs=None,
                    rollback_lengths=None, write_json=True, out_dir: Path = harness.RESULTS,
                    verbose=True) -> dict:
    """Runs both benchmarks and returns (and by default writes to out_dir/cache_bench.json)
    the result dict."""
    if model is None:
        model, model_name = random_smollm2(), model_name or "random SmolLM2-135M-shaped llama (float32)"
    if decode_configs is None:
        decode_configs = [(16, 48)] if quick else [(16, 128), (512, 64)]
    if rollback_lengths is None:
        rollback_lengths = [64, 256, 1024, 4096] if quick else [64, 128, 256, 512, 1024, 2048, 4096]

    result = {"model": model_name, "machine": platform.machine(), "python": platform.python_version(),
              "mlx": mx.__version__, "decode": [], "rollback": [], "prefix_reuse": None}
    for prompt_len, steps in decode_configs:
        r = bench_decode(model, prompt_len=prompt_len, steps=steps)
        result["decode"].append(r)
        if verbose:
            print(f"decode after {prompt_len:4d}-token prompt, {steps} steps: "
                  f"mlx-lm {r['mlx_lm_tok_per_s']:.2f} tok/s, paged {r['paged_tok_per_s']:.2f} tok/s, "
                  f"ratio {r['tok_per_s_ratio_paged_over_mlx']:.3f} (paired step ratio "
                  f"{r['median_paired_step_time_ratio']:.3f}, total {r['total_time_ratio']:.3f}), "
                  f"same tokens: {r['same_tokens']}", flush=True)

    result["prefix_reuse"] = r = bench_prefix_reuse(model)
    if verbose:
        print(f"prefix reuse: {r['system_len']}-token system prompt cached, {r['question_len']} new "
              f"tokens: {r['prefix_reuse_ms']:.1f} ms to first logits vs {r['full_prefill_ms']:.1f} ms "
              f"computing all (x{r['speedup']:.1f}; max |logit diff| {r['max_abs_logit_diff']:.1e})",
              flush=True)

    pool_factory = lambda: PagedKVPool.for_model(model, block_size=16, num_blocks=64)  # noqa: E731
    result["rollback"] = bench_rollback(pool_factory, rollback_lengths, repeats=50 if quick else 200)
    if verbose:
        print("\nrollback of n tokens, median µs (30 layers; the paged rollback also returns trailing "
              "blocks to the pool); mlx-lm = trim_prompt_cache on its KVCache list")
        print(f"{'length':>8} {'paged n=1':>10} {'paged n=8':>10} {'paged n=24':>11} {'blocks freed':>13} "
              f"{'mlx-lm n=8':>11} {'paged/mlx n=8':>14}")
        for r in result["rollback"]:
            print(f"{r['length']:>8} {r['rollback_1_us']:>10.2f} {r['rollback_8_us']:>10.2f} "
                  f"{r['rollback_24_us']:>11.2f} {r['rollback_24_max_blocks_freed']:>13} "
                  f"{r['mlx_trim_8_us']:>11.2f} {r['rollback_8_us'] / r['mlx_trim_8_us']:>14.2f}")
    if write_json:  # one entry per model: a run replaces the previous run on the same model
        path = Path(out_dir) / "cache_bench.json"
        runs = []
        if path.exists():
            try:
                runs = json.loads(path.read_text()).get("runs", [])
            except (ValueError, AttributeError):
                runs = []
        runs = [r for r in runs if r.get("model") != result["model"]] + [result]
        harness.write_json(path, {"runs": runs})
        if verbose:
            print(f"\nwrote {path}")
    return result


def main(argv=None):
    ap = harness.arg_parser(__doc__, "fewer steps and lengths")
    ap.add_argument("--real", action="store_true", help="use onyx.models.loader.load() (the default model)")
    ap.add_argument("--no-json", action="store_true")
    a = ap.parse_args(argv)
    model = name = None
    if a.real:
        from onyx.models.loader import load

        loaded = load()
        model, name = loaded.model, f"{loaded.name} ({loaded.dtype})"
    run_cache_bench(model, model_name=name, quick=a.quick, write_json=not a.no_json, out_dir=a.out)


if __name__ == "__main__":
    main()
