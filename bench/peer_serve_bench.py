#!/usr/bin/env python3
"""Onyx's server beside llama.cpp's `llama-server` on the same GGUF file.

Both serve the embedded default model, SmolLM2-135M-Instruct Q4_1 (both compute on its 4-bit
weights as stored; `--onyx-dtype float32` runs Onyx on float32 copies), with the same number of threads, on
loopback, at once (servers and loads take turns within each client count, so they share the
machine's load). llama.cpp runs with 8 slots and continuous batching (its defaults otherwise);
`bench/llama_server.py` builds it once into a cache folder.

Loads, greedy streamed chat completions:
- `free`: a long story, 64 tokens;
- `grammar`: one sentence of 24-64 words, at most 160 tokens: Onyx's `regex`, llama.cpp the same
  language as a GBNF `grammar` (each server's own way of taking a grammar);
- `json`: the order schema of bench/corpus.py as `response_format` (json_schema) on both, at most
  160 tokens.
Every constrained output is checked (the regex; `jsonschema`), and the invalid ones counted per
server: an answer cut off by `max_tokens` before it is complete counts as invalid.

    python bench/peer_serve_bench.py                    # clients 1, 2, 4, 8; about 20 minutes
    python bench/peer_serve_bench.py --quick            # clients 1 and 8, one request each
    python bench/peer_serve_bench.py --llama-server PATH

Prints one table and the targets, writes peer_serve_bench.json to --out.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402

from bench import llama_server  # noqa: E402
from bench.corpus import ORDER_SCHEMA_FREE  # noqa: E402
from bench.serve_bench import LOADS as SERVE_LOADS  # noqa: E402
from bench.serve_bench import WORDS, Server, run_clients, stream_chat, timing  # noqa: E402

# serve_bench's prompts and constraints; llama.cpp takes the regex's language as GBNF
WORDS_GBNF = 'root ::= [A-Z] [a-z]+ (" " [a-z]+){23,63} "."\n'
RESPONSE_FORMAT = SERVE_LOADS["json"][1]["response_format"]
# load -> (messages, max_tokens, the body's constraint per server)
LOADS = {
    "free": (SERVE_LOADS["free"][0], 64, {"onyx": {}, "llama.cpp": {}}),
    "grammar": (SERVE_LOADS["regex"][0], 160, {"onyx": {"regex": WORDS}, "llama.cpp": {"grammar": WORDS_GBNF}}),
    "json": (SERVE_LOADS["json"][0], 160,
             {"onyx": {"response_format": RESPONSE_FORMAT}, "llama.cpp": {"response_format": RESPONSE_FORMAT}}),
}


def valid(load: str, text: str) -> bool:
    """Whether an answer is in its load's language (free text always is)."""
    if load == "grammar":
        return re.fullmatch(WORDS, text) is not None
    if load == "json":
        import jsonschema

        try:
            jsonschema.validate(json.loads(text), ORDER_SCHEMA_FREE)
        except (ValueError, jsonschema.ValidationError):
            return False
    return True


def run_load(server: Server, load: str, clients: int, per_client: int) -> dict:
    """`clients` threads at once, each sending `per_client` requests in a row; every answer
    checked against its load's language."""
    messages, max_tokens, constraint = LOADS[load]
    body = {"model": "default", "messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}, **constraint[server.name]}
    results, errors, wall = run_clients(lambda: stream_chat(server.base, body), clients, per_client)
    invalid = [r for r in results if not valid(load, r["text"])]
    return {"server": server.name, "load": load, "clients": clients, "errors": errors, **timing(results, wall),
            "invalid": len(invalid), "cut_off": sum(1 for r in results if r["finish"] == "length"),
            "invalid_sample": invalid[0]["text"][-160:] if invalid else None}


def targets(runs: list[dict]) -> dict:
    """The issue's targets from the runs: each a ratio Onyx / llama.cpp (aggregate tokens/s)
    and whether it is met; and the invalid outputs of each server."""
    def tok_s(server, load, c):
        return next((r["agg_tok_s"] for r in runs if (r["server"], r["load"], r["clients"]) == (server, load, c)), None)

    out = {}
    for load, c, goal in (("free", 1, 1.0), ("grammar", 1, 1.0), ("json", 1, 1.5),
                          ("free", 8, 1.5), ("grammar", 8, 1.5), ("json", 8, 1.5)):
        a, b = tok_s("onyx", load, c), tok_s("llama.cpp", load, c)
        ratio = round(a / b, 3) if a and b else None
        out[f"{load}_{c}"] = {"onyx_over_llama_cpp": ratio, "goal": goal, "met": ratio is not None and ratio >= goal}
    for server in ("onyx", "llama.cpp"):
        out[f"invalid_{server}"] = sum(r["invalid"] for r in runs if r["server"] == server)
    return out


def main() -> int:
    ap = harness.arg_parser(__doc__, "clients 1 and 8, one request per client")
    ap.add_argument("--clients", default=None, help="comma-separated client counts (default 1,2,4,8)")
    ap.add_argument("--per-client", type=int, default=None, help="requests each client sends (default 2)")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--threads", type=int, default=None, help="threads of each server (default: Onyx's products')")
    ap.add_argument("--llama-server", type=Path, default=None, help="a llama-server binary (default: built, cached)")
    ap.add_argument("--onyx-dtype", default=None, choices=["quantized", "float32"], help="Onyx's --dtype (default: its own)")
    args = ap.parse_args()
    clients = [int(c) for c in (args.clients or ("1,8" if args.quick else "1,2,4,8")).split(",")]
    per_client = args.per_client or (1 if args.quick else 2)
    loads = args.loads.split(",")
    out = harness.out_dir(args.out)
    log_dir = Path(tempfile.mkdtemp(prefix="peer_serve_bench_"))

    from onyx.cpu.blas import shim_threads
    from onyx.models import assets
    from onyx.models.loader import DEFAULT_MODEL, KNOWN_MODELS

    gguf = assets.fetch(KNOWN_MODELS[DEFAULT_MODEL], quiet=True)
    threads = args.threads or shim_threads()
    binary = args.llama_server or llama_server.build()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("ONYX_API_KEY", None)
    onyx_cmd = [sys.executable, "-m", "onyx.server", "--max-tokens-limit", "2048", "--log-level", "warning"]
    if args.onyx_dtype:
        onyx_cmd += ["--dtype", args.onyx_dtype]
    llama_cmd = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "-t", str(threads), "-tb", str(threads),
                 "-np", "8", "-c", str(8 * 2048)]
    servers = {"onyx": Server("onyx", onyx_cmd, cwd=harness.ROOT, env=env, log_dir=log_dir),
               "llama.cpp": Server("llama.cpp", llama_cmd, cwd=harness.ROOT, env=env, log_dir=log_dir)}
    runs = []
    try:
        for s in servers.values():
            s.wait_ready()
        plan = [(name, load) for load in loads for name in servers]
        for name, load in plan:  # warm-up: grammars compiled, caches filled
            run_load(servers[name], load, 1, 1)
        print(f"{'server':>9} {'load':>7} {'C':>3} {'req':>4} {'tok':>5} {'tok/s':>7} {'TTFT p50':>9} {'ITL p50':>8} "
              f"{'p99':>7} {'invalid':>7} {'cut':>4}", flush=True)
        for c in clients:
            for name, load in plan:
                r = run_load(servers[name], load, c, per_client)
                runs.append(r)
                print(f"{name:>9} {load:>7} {c:>3} {r['requests']:>4} {r['tokens']:>5} {r['agg_tok_s']!s:>7} "
                      f"{r['ttft_ms_p50']!s:>9} {r['itl_ms_p50']!s:>8} {r['itl_ms_p99']!s:>7} {r['invalid']:>7} "
                      f"{r['cut_off']:>4}" + (f"  errors: {r['errors'][:2]}" if r["errors"] else ""), flush=True)
            plan = plan[1:] + plan[:1]  # another order for the next client count
    finally:
        for s in servers.values():
            s.stop()
    data = {"bench": "peer_serve", "machine": harness.machine_meta(), "loadavg": harness.loadavg(),
            "model": str(gguf.name), "threads": threads, "per_client": per_client, "clients": clients,
            "loads": {k: {"max_tokens": v[1], "constraint": v[2]} for k, v in LOADS.items() if k in loads},
            "commands": {"onyx": onyx_cmd, "llama.cpp": llama_cmd}, "llama_cpp_version": llama_server.VERSION,
            "runs": runs, "targets": targets(runs)}
    print("\ntargets:", json.dumps(data["targets"], indent=1))
    harness.save_results(out, "peer_serve_bench", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
