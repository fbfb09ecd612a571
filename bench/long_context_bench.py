#!/usr/bin/env python3
"""Long prompts: the time to the first token (the prompt's prefill) and the time per token after
it (decoding over a long history), against another revision and mlx-lm's server.

Real servers in subprocesses, one request at a time, streamed greedy chat completions of
`--max-tokens` tokens. The prompt is this repository's documentation cut to N tokens of the
default model's tokenizer (N in `--lengths`), followed by a request to summarise it. Servers:

- `onyx`: this checkout's `python -m onyx.server`;
- `onyx-base`: the same from another revision (`--base`, default the merge base with `main`);
- `mlx-lm`: `mlx_lm server` on the float32 copy of the same model, OpenBLAS preloaded (as
  `bench/serve_bench.py` runs it); `--no-mlx` leaves it out.

Every server is warmed up with a short request first; then the servers take turns, `--rounds`
times per length, each prompt with a first line of its own so that no server's prompt cache holds
any of it. Reported per server and length: TTFT (median, seconds) and the time per token after
the first (the median over rounds of each answer's average, ms), and each server's ratio to this
checkout.

    python bench/long_context_bench.py                       # about 15 minutes on 2 cores
    python bench/long_context_bench.py --lengths 2400 --rounds 1 --no-mlx

Writes long_context_bench.json to --out.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import os  # noqa: E402
import tempfile  # noqa: E402

from bench.serve_bench import CACHE, ROOT, Server, base_server, mlx_server, stream_chat  # noqa: E402


def long_prompts(lengths: list[int]) -> dict[int, str]:
    """This repository's docs cut to each of `lengths` tokens of the default model's tokenizer."""
    from tokenizers import Tokenizer

    from onyx.models.loader import resolve

    folder, _ = resolve(None)
    tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    ids = tok.encode("\n\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))).ids
    if len(ids) < max(lengths):
        raise SystemExit(f"the docs hold {len(ids)} tokens, fewer than {max(lengths)}")
    return {n: tok.decode(ids[:n]) for n in lengths}


def one(server: Server, prompt: str, max_tokens: int, model: str) -> dict:
    """One request; the time per token after the first is the decode's average (tokens that a
    step commits together arrive together, so the gaps between deltas are not it)."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt + "\n\nSummarise the text above."}],
            "max_tokens": max_tokens, "temperature": 0.0, "stream": True}
    r = stream_chat(server.base, body)
    arrivals = r["arrivals"]
    per_token = (arrivals[-1] - arrivals[0]) / (r["tokens"] - 1) if arrivals and r["tokens"] > 1 else None
    return {"ttft_s": (arrivals[0] - r["t0"]) if arrivals else None,
            "itl_ms": None if per_token is None else 1e3 * per_token, "tokens": r["tokens"]}


def main() -> None:
    ap = harness.arg_parser(__doc__, "one length, one round")
    ap.add_argument("--lengths", default="600,1200,2400", help="prompt lengths in tokens")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--base", default=None, help="revision for onyx-base (default: merge base with main)")
    ap.add_argument("--no-base", action="store_true")
    ap.add_argument("--no-mlx", action="store_true")
    args = ap.parse_args()
    lengths = [2400] if args.quick else [int(n) for n in args.lengths.split(",")]
    rounds = 1 if args.quick else args.rounds
    out = harness.out_dir(args.out)
    CACHE.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="long_context_bench_"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("ONYX_API_KEY", None)
    onyx_cmd = [sys.executable, "-m", "onyx.server", "--log-level", "warning"]
    servers = {"onyx": Server("onyx", onyx_cmd, cwd=ROOT, env=env, log_dir=log_dir)}
    meta = {"onyx_cmd": onyx_cmd, "lengths": lengths, "rounds": rounds, "max_tokens": args.max_tokens}
    models = {"onyx": "onyx", "onyx-base": "onyx"}
    if not args.no_base:
        servers["onyx-base"], meta["base_revision"] = base_server(args.base, onyx_cmd, env, log_dir)
    if not args.no_mlx:
        servers["mlx-lm"], mlx_meta = mlx_server(env, log_dir)
        models["mlx-lm"] = mlx_meta["mlx_model"]
        meta.update(mlx_meta)
    runs = []
    try:
        for s in servers.values():
            s.wait_ready()
        for name, s in servers.items():
            one(s, "Say hello.", 8, models[name])  # warm-up
        prompts = long_prompts(lengths)
        for n in lengths:
            for rnd in range(rounds):
                for name, s in servers.items():
                    # a first line of its own: no prefix of it is in any server's prompt cache
                    r = {"server": name, "prompt_tokens": n, "round": rnd,
                         **one(s, f"Document {n}-{rnd}.\n" + prompts[n], args.max_tokens, models[name])}
                    runs.append(r)
                    print(f"{name:10} {n:5} tokens  TTFT {r['ttft_s']:.2f} s  ITL {r['itl_ms'] or 0:.1f} ms  "
                          f"({r['tokens']} tokens)", flush=True)
    finally:
        for s in servers.values():
            s.stop()
    summary = []
    for n in lengths:
        row = {"prompt_tokens": n}
        for name in servers:
            mine = [r for r in runs if r["server"] == name and r["prompt_tokens"] == n]
            row[f"{name}_ttft_s"] = round(harness.median([r["ttft_s"] for r in mine]), 3)
            itl = [r["itl_ms"] for r in mine if r["itl_ms"] is not None]
            row[f"{name}_itl_ms"] = round(harness.median(itl), 2) if itl else None
        for name in servers:
            if name != "onyx":
                row[f"ttft_{name}_over_onyx"] = round(row[f"{name}_ttft_s"] / row["onyx_ttft_s"], 2)
                if row["onyx_itl_ms"] and row[f"{name}_itl_ms"]:
                    row[f"itl_{name}_over_onyx"] = round(row[f"{name}_itl_ms"] / row["onyx_itl_ms"], 2)
        summary.append(row)
    head = ["prompt tokens"] + [f"{n} TTFT s" for n in servers] + [f"{n} ITL ms" for n in servers]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in summary:
        cells = [str(row["prompt_tokens"])] + [f"{row[f'{n}_ttft_s']:.2f}" for n in servers] + \
                [f"{row[f'{n}_itl_ms']}" for n in servers]
        print("| " + " | ".join(cells) + " |")
    for row in summary:
        print(row["prompt_tokens"], {k: v for k, v in row.items() if "_over_" in k})
    harness.save_results(out, "long_context_bench", {"meta": {**harness.machine_meta(), **meta}, "summary": summary,
                                                     "runs": runs})


if __name__ == "__main__":
    main()
