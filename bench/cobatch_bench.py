#!/usr/bin/env python3
"""Co-batch latency: what one heavy request costs the streams already running.

A real `python -m onyx.server` with the default model. Eight clients stream free text (greedy,
`max_tokens` 160). In the quiet rounds nothing else arrives; in the disturbed rounds, one second
in, three heavy requests arrive together: a cold JSON Schema (the Kubernetes Deployment schema of
tests/data, made cold by a fresh `description`), a cold regex whose token index is about 100 MB
(`[a-z ]{1,N}`, N fresh each round), and a 2,500-token prompt. Rounds alternate, so both kinds
share the machine's load. Reported per kind:

    ITL p50 / p99      gaps between the eight streams' consecutive content deltas, from one
                       second in to the end of the heavy requests (quiet rounds: to the
                       streams' end, so both kinds cover the same part of the streams' lives)
    max gap            the longest stall of any stream in that window
    health p99         GET /health latency sampled every 50 ms in the window

and the ratio disturbed / quiet of the ITL p99 over all rounds of each kind (the issue's gate:
at most 1.25). The machine's own noise moves one round's p99 by tens of percent, so the ratio
is also given per pair of rounds (a quiet one and the disturbed one after it, median and range)
and as a 90% interval from resampling the pairs.

    python bench/cobatch_bench.py              # 8 rounds of each kind, about 6 minutes
    python bench/cobatch_bench.py --rounds 1 --out /tmp/cb
    python bench/cobatch_bench.py --heavy prompt --server-arg=--compile-nice=0

Writes cobatch_bench.json to --out (default bench/results).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.corpus import STORY  # noqa: E402
from bench.serve_bench import Server  # noqa: E402

ROOT = harness.ROOT
STREAMS = 8
STREAM_TOKENS = 160
DISTURB_AFTER_S = 1.0
LONG_PROMPT_TOKENS = 2500
KUBERNETES = ROOT / "tests" / "data" / "kubernetes_deployment_schema.json.gz"


def stream(base: str, out: list, i: int) -> None:
    import httpx

    body = {"model": "onyx", "messages": [{"role": "user", "content": STORY}], "max_tokens": STREAM_TOKENS,
            "temperature": 0.0, "stream": True, "seed": i}
    arrivals = []
    with httpx.Client(timeout=600) as c, c.stream("POST", base + "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:300]!r}")
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content"' in line:
                obj = json.loads(line[6:])
                if any((ch.get("delta") or {}).get("content") for ch in obj.get("choices") or []):
                    arrivals.append(time.perf_counter())
    out[i] = arrivals


HEAVY = ("schema", "regex", "prompt")


def heavy_requests(base: str, round_no: int, long_prompt: str, kinds=HEAVY) -> list[dict]:
    schema = json.loads(gzip.open(KUBERNETES).read())
    schema["description"] = f"a deployment, round {round_no} {time.time()}"
    bodies = {
        "schema": {"messages": [{"role": "user", "content": "A deployment as JSON."}], "max_tokens": 16,
         "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": schema}}},
        "regex": {"messages": [{"role": "user", "content": "Some words."}], "max_tokens": 16,
                  "regex": "[a-z ]{1,%d}" % (1400 + 7 * round_no + (os.getpid() % 7))},
        "prompt": {"messages": [{"role": "user", "content": f"Round {round_no}, {time.time()}. {long_prompt}"}],
                   "max_tokens": 4},
    }
    return [{"model": "onyx", "temperature": 0.0, **bodies[k]} for k in kinds]


def post(base: str, body: dict, out: list, i: int) -> None:
    import httpx

    t0 = time.perf_counter()
    r = httpx.post(base + "/v1/chat/completions", json=body, timeout=600)
    out[i] = {"status": r.status_code, "s": time.perf_counter() - t0, "end": time.perf_counter(),
              "error": None if r.status_code == 200 else r.text[:200]}


def sample_health(base: str, stop: threading.Event, out: list) -> None:
    import httpx

    with httpx.Client(timeout=60) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            c.get(base + "/health")
            out.append(time.perf_counter() - t0)
            stop.wait(0.05)


def one_round(base: str, disturbed: bool, round_no: int, long_prompt: str, kinds=HEAVY) -> dict:
    arrivals: list = [None] * STREAMS
    threads = [threading.Thread(target=stream, args=(base, arrivals, i)) for i in range(STREAMS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(DISTURB_AFTER_S)
    window_start = time.perf_counter()
    health: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_health, args=(base, stop, health))
    sampler.start()
    heavy: list = []
    if disturbed:
        bodies = heavy_requests(base, round_no, long_prompt, kinds)
        heavy = [None] * len(bodies)
        posts = [threading.Thread(target=post, args=(base, b, heavy, i)) for i, b in enumerate(bodies)]
        for t in posts:
            t.start()
        for t in posts:
            t.join()
        window_end = max(h["end"] for h in heavy)
    else:
        window_end = None
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    if window_end is None:  # quiet: the same part of the streams' lives, to their end
        window_end = max(a[-1] for a in arrivals if a)
    gaps = []
    for a in arrivals:
        a = np.array(a)
        inside = a[(a >= window_start) & (a <= window_end)]
        gaps.extend(np.diff(inside).tolist())
    return {"disturbed": disturbed, "window_s": window_end - window_start, "gaps": gaps, "health": health,
            "heavy": [{k: v for k, v in h.items() if k != "end"} for h in heavy], "total_s": time.perf_counter() - start}


def summarize(rounds: list[dict]) -> dict:
    gaps = np.array([g for r in rounds for g in r["gaps"]]) * 1000
    health = np.array([h for r in rounds for h in r["health"]]) * 1000
    return {"rounds": len(rounds), "gaps": int(gaps.size),
            "itl_p50_ms": float(np.percentile(gaps, 50)) if gaps.size else None,
            "itl_p99_ms": float(np.percentile(gaps, 99)) if gaps.size else None,
            "max_gap_ms": float(gaps.max()) if gaps.size else None,
            "health_p99_ms": float(np.percentile(health, 99)) if health.size else None,
            "window_s": float(np.mean([r["window_s"] for r in rounds]))}


def p99_ratio(pairs: list[tuple[dict, dict]]) -> float | None:
    """ITL p99 of the disturbed rounds over that of the quiet ones, over the (quiet, disturbed)
    pairs given."""
    quiet = summarize([q for q, _ in pairs])["itl_p99_ms"]
    busy = summarize([b for _, b in pairs])["itl_p99_ms"]
    return busy / quiet if quiet and busy is not None else None


def spread(pairs: list[tuple[dict, dict]], resamples: int = 1000) -> dict:
    """The ratio per pair of rounds, and a 90% bootstrap interval of the pooled ratio (pairs
    drawn with replacement): how far the machine's noise alone moves the gate's figure."""
    per_pair = [p99_ratio([p]) for p in pairs]
    rng = np.random.default_rng(0)
    drawn = [p99_ratio([pairs[i] for i in rng.integers(0, len(pairs), len(pairs))]) for _ in range(resamples)]
    return {"pair_ratios": per_pair, "pair_ratio_median": float(np.median(per_pair)),
            "ratio_interval_90": [float(np.percentile(drawn, 5)), float(np.percentile(drawn, 95))]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--heavy", default=",".join(HEAVY), help=f"which heavy requests arrive (default {','.join(HEAVY)})")
    p.add_argument("--before", type=Path, help="a cobatch_bench.json of an earlier commit, kept beside this run's")
    p.add_argument("--server-arg", action="append", default=[],
                   help="an argument for the server (repeatable), e.g. --server-arg=--compile-nice=0")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    # About LONG_PROMPT_TOKENS tokens of English (SmolLM2's tokenizer writes about 4 characters
    # a token).
    long_prompt = "Summarize this in one word. " + (STORY + "\n") * (LONG_PROMPT_TOKENS * 4 // len(STORY) + 1)

    log_dir = Path(tempfile.mkdtemp(prefix="cobatch-"))
    command = [sys.executable, "-m", "onyx.server", "--log-level", "warning", "--max-batch", "16", *args.server_arg]
    server = Server("onyx", command, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, log_dir=log_dir)
    try:
        server.wait_ready()
        # warm-up: one round of each kind, so the KV pool and the view arrays have grown to
        # what this load holds (a one-time cost of a server's first minutes) before measuring
        one_round(server.base, False, -2, long_prompt)
        one_round(server.base, True, -1, long_prompt, args.heavy.split(","))
        rounds = []
        for k in range(args.rounds):
            for disturbed in (False, True):
                r = one_round(server.base, disturbed, k, long_prompt, args.heavy.split(","))
                rounds.append(r)
                bad = [h for h in r["heavy"] if h["status"] != 200]
                if bad:
                    print(f"heavy request failed: {bad}", file=sys.stderr)
    finally:
        server.stop()
    quiet = summarize([r for r in rounds if not r["disturbed"]])
    busy = summarize([r for r in rounds if r["disturbed"]])
    ratio = busy["itl_p99_ms"] / quiet["itl_p99_ms"] if quiet["itl_p99_ms"] else None
    print(f"{'rounds':<10}{'ITL p50 ms':>12}{'ITL p99 ms':>12}{'max gap ms':>12}{'/health p99 ms':>16}{'window s':>10}")
    for name, s in (("quiet", quiet), ("disturbed", busy)):
        print(f"{name:<10}{s['itl_p50_ms']:>12.1f}{s['itl_p99_ms']:>12.1f}{s['max_gap_ms']:>12.1f}"
              f"{s['health_p99_ms']:>16.1f}{s['window_s']:>10.2f}")
    print(f"ITL p99 disturbed / quiet: {ratio:.2f} (gate: <= 1.25)")
    noise = spread([(rounds[i], rounds[i + 1]) for i in range(0, len(rounds), 2)])
    lo, hi = noise["ratio_interval_90"]
    print("per pair of rounds: " + ", ".join(f"{x:.2f}" for x in noise["pair_ratios"])
          + f" (median {noise['pair_ratio_median']:.2f}); 90% interval of the ratio: {lo:.2f}-{hi:.2f}")
    heavy = [h for r in rounds for h in r["heavy"]]
    print("heavy requests (s): " + ", ".join(f"{h['s']:.2f}" for h in heavy))
    result = {"meta": {**harness.machine_meta(), "commit": harness.checkout_commit()}, "quiet": quiet,
              "disturbed": busy, "itl_p99_ratio": ratio, **noise, "heavy": heavy}
    if args.before is not None:
        b = json.loads(args.before.read_text())
        result["before"] = {"commit": b["meta"]["commit"],
                            **{k: b[k] for k in ("quiet", "disturbed", "itl_p99_ratio", "heavy") if k in b}}
    harness.write_json(args.out / "cobatch_bench.json", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
