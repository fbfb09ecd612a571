#!/usr/bin/env python3
"""Serving benchmark: many HTTP clients at once against `onyx serve` and mlx-lm's server.

Real servers in subprocesses, real HTTP (streamed chat completions, greedy). Each of C clients
(C in 1, 2, 4, 8, 16) sends its requests one after the other, all clients at once; per server,
load and C it reports:

    aggregate tok/s      completion tokens of all requests / wall time from first send to last byte
    TTFT p50 / p99       send → first content delta, per request
    ITL p50 / p99        gaps between consecutive content deltas (Onyx streams every committed
                         token as its own delta, also when one step commits several)

Servers, loaded with the same SmolLM2-135M-Instruct weights, each as it runs best on this CPU:
- `onyx`: this checkout's `python -m onyx.server --max-batch 16` (continuous batching; its 4- and
  8-bit weights as stored, multiplied by the BLAS shim);
- `onyx-base`: the same command from another revision (default: the merge base with `main`,
  extracted with `git archive` into a cache folder; the compiled grammar core is this
  checkout's), at 1 client only: "one client is no slower than before batching";
- `mlx-lm`: `python -m mlx_lm server` on the default model's folder converted with
  `mlx_lm convert -d --dtype float32` (cached under ~/.cache/onyx/bench/; MLX's own quantized
  CPU product is far slower than float32 here), with OpenBLAS
  preloaded the way Onyx loads it (`LD_PRELOAD` of `onyx.cpu.blas.find_blas_library()`, as many
  OpenBLAS threads as Onyx's products use, `--mlx-threads` to change); it has
  no grammar, so it runs the unconstrained load only.

Loads: `free` (a long story, unconstrained), `regex` (words and punctuation, 24-64 words),
`json` (the order schema of bench/corpus.py, `response_format` json_schema). Servers and loads
run round-robin within each client count, so they share the machine's load.

    python bench/serve_bench.py                 # about an hour on 2 busy cores
    python bench/serve_bench.py --quick         # clients 1 and 8, one request each
    python bench/serve_bench.py --no-base --no-mlx --clients 1,4
    python bench/serve_bench.py --base REV --base-every --loads free,json   # A/B of two revisions

Writes serve_bench.json and serve_bench.png (aggregate tok/s against clients) to --out.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx)

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.corpus import ORDER_SCHEMA_FREE, STORY  # noqa: E402

ROOT = harness.ROOT
CACHE = Path.home() / ".cache" / "onyx" / "bench"
WORDS = r"[A-Z][a-z]+( [a-z]+){23,63}\."
LOADS = {
    "free": ([{"role": "user", "content": STORY}], {}),
    "regex": ([{"role": "user", "content": "Describe a walk through a forest at dawn, in one long sentence."}],
              {"regex": WORDS}),
    "json": ([{"role": "user", "content": "Write an order as JSON: order ID ORD-1042 for customer Jane Doe "
                                          "(jane@shop.com), who bought 2 notebooks (SKU NB-01) at 3.50 each and "
                                          "1 pen (SKU PN-07) at 1.25."}],
             {"response_format": {"type": "json_schema", "json_schema": {"name": "order",
                                                                         "schema": ORDER_SCHEMA_FREE}}}),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server subprocess on a free loopback port, ready when GET /health answers."""

    def __init__(self, name: str, cmd: list[str], *, cwd: Path, env: dict, log_dir: Path) -> None:
        self.name = name
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd + ["--port", str(self.port)], cwd=cwd, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 900) -> None:
        import httpx

        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.base + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise RuntimeError(f"{self.name} did not come up in {timeout} s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def stream_chat(base: str, body: dict) -> dict:
    """One streamed chat completion: send time, content-delta arrival times, completion tokens
    (the usage chunk's, else one per delta), text and finish reason."""
    import httpx

    t0 = time.perf_counter()
    arrivals, tokens, text, finish = [], None, [], None
    with httpx.Client(timeout=1800) as c, c.stream("POST", base + "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:300]!r}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            obj = json.loads(line[6:])
            if obj.get("usage"):
                tokens = obj["usage"].get("completion_tokens", tokens)
            for ch in obj.get("choices") or []:
                content = (ch.get("delta") or {}).get("content")
                if content:
                    arrivals.append(time.perf_counter())
                    text.append(content)
                finish = ch.get("finish_reason") or finish
    return {"t0": t0, "t1": time.perf_counter(), "arrivals": arrivals, "text": "".join(text), "finish": finish,
            "tokens": tokens if tokens is not None else len(arrivals)}


def one_request(base: str, load: str, max_tokens: int, model: str) -> dict:
    """One streamed, greedy chat completion of `load`."""
    messages, extra = LOADS[load]
    return stream_chat(base, {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0,
                              "stream": True, "stream_options": {"include_usage": True}, **extra})


def run_clients(send, clients: int, per_client: int) -> tuple[list[dict], list[str], float]:
    """`clients` threads at once, each calling `send()` `per_client` times in a row. Returns the
    answers, the errors (as text) and the wall time."""
    results: list[dict] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(per_client):
            try:
                r = send()
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors, time.perf_counter() - start


def timing(results: list[dict], wall: float) -> dict:
    """Aggregate tokens/s and the TTFT and inter-token percentiles of streamed answers (each with
    `t0`, `arrivals` and `tokens`)."""
    tokens = sum(r["tokens"] for r in results)
    ttft = [r["arrivals"][0] - r["t0"] for r in results if r["arrivals"]]
    itl = [b - a for r in results for a, b in zip(r["arrivals"], r["arrivals"][1:])]

    def pct(xs, q):
        return round(1e3 * float(np.percentile(xs, q)), 1) if xs else None

    return {"requests": len(results), "tokens": tokens, "wall_s": round(wall, 3),
            "agg_tok_s": round(tokens / wall, 2) if wall > 0 else None,
            "ttft_ms_p50": pct(ttft, 50), "ttft_ms_p99": pct(ttft, 99),
            "itl_ms_p50": pct(itl, 50), "itl_ms_p99": pct(itl, 99)}


def run_load(server: Server, load: str, clients: int, per_client: int, max_tokens: int, model: str) -> dict:
    """`clients` threads, each sending `per_client` requests in a row, all at once."""
    results, errors, wall = run_clients(lambda: one_request(server.base, load, max_tokens, model), clients, per_client)
    return {"server": server.name, "load": load, "clients": clients, "errors": errors, **timing(results, wall),
            "sample_text": results[0]["text"][:120] if results else None}


def base_checkout(rev: str) -> Path:
    """Revision `rev` of this repository as plain files (git archive) in a cache folder, with this
    checkout's compiled grammar core copied in (the Rust core is not what is compared)."""
    sha = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    dest = CACHE / f"onyx-{sha[:12]}"
    if not (dest / "onyx").is_dir():
        tmp = Path(tempfile.mkdtemp(dir=CACHE))
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        tmp.rename(dest)
    for so in (ROOT / "onyx").glob("_grammar*.so"):
        shutil.copy2(so, dest / "onyx" / so.name)
    return dest


def base_server(rev: str | None, cmd: list[str], env: dict, log_dir: Path) -> tuple[Server, str]:
    """`onyx-base`: `cmd` run from revision `rev` (None: the merge base with `main`), and that
    revision."""
    rev = rev or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
    base_dir = base_checkout(rev)
    return Server("onyx-base", cmd, cwd=base_dir, env={**env, "PYTHONPATH": str(base_dir)}, log_dir=log_dir), rev


def mlx_server(env: dict, log_dir: Path, threads: int | None = None) -> tuple[Server, dict]:
    """mlx-lm's server on the default model's float32 copy with OpenBLAS preloaded, and what it
    runs (`mlx_model`, the folder, is also the model name its requests must give)."""
    from onyx.cpu.blas import find_blas_library, shim_threads

    folder = mlx_model_folder()
    mlx_env = dict(env)
    blas = find_blas_library()
    if blas:
        mlx_env["LD_PRELOAD"] = blas
        # As many OpenBLAS threads as Onyx's products use (onyx.cpu.blas.shim_threads(): two
        # on this machine), so that both servers may use the same cores.
        mlx_env["OPENBLAS_NUM_THREADS"] = str(threads or shim_threads())
    server = Server("mlx-lm", [sys.executable, "-m", "mlx_lm", "server", "--model", str(folder), "--log-level",
                               "WARNING"], cwd=ROOT, env=mlx_env, log_dir=log_dir)
    return server, {"mlx_model": str(folder), "mlx_ld_preload": blas, "mlx_lm": harness.package_version("mlx-lm"),
                    "mlx_openblas_threads": mlx_env.get("OPENBLAS_NUM_THREADS")}


def mlx_model_folder() -> Path:
    """The default model's folder converted to float32 for mlx-lm (once, cached)."""
    from onyx.models.loader import resolve

    out = CACHE / "smollm2-f32-mlx"
    if not (out / "config.json").is_file():
        src, _ = resolve(None)
        if out.exists():
            shutil.rmtree(out)
        subprocess.run([sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(src), "--mlx-path", str(out),
                        "-d", "--dtype", "float32"], check=True)
    return out


def plot(data, path):
    plt = harness.pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (server, load), style in ((("onyx", "free"), "o-"), (("onyx", "regex"), "s-"), (("onyx", "json"), "^-"),
                                  (("mlx-lm", "free"), "x--")):
        rows = [r for r in data["runs"] if r["server"] == server and r["load"] == load]
        if rows:
            rows.sort(key=lambda r: r["clients"])
            ax.plot([r["clients"] for r in rows], [r["agg_tok_s"] for r in rows], style, label=f"{server} {load}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("clients in parallel")
    ax.set_ylabel("aggregate tokens/s")
    ax.set_title("Serving SmolLM2-135M (float32, CPU): aggregate throughput")
    ax.grid(alpha=0.3)
    ax.legend()
    harness.save_figure(fig, path)
    return True


def targets(runs: list[dict]) -> dict:
    def get(server, load, c):
        for r in runs:
            if r["server"] == server and r["load"] == load and r["clients"] == c:
                return r["agg_tok_s"]
        return None

    def ratio(a, b):
        return round(a / b, 3) if a and b else None

    out = {}
    mlx8 = get("mlx-lm", "free", 8)
    for load in ("regex", "json"):
        out[f"onyx_{load}_8_vs_mlx_free_8"] = ratio(get("onyx", load, 8), mlx8)
    for load in LOADS:
        out[f"onyx_{load}_8_vs_1"] = ratio(get("onyx", load, 8), get("onyx", load, 1))
        out[f"onyx_{load}_1_vs_base_1"] = ratio(get("onyx", load, 1), get("onyx-base", load, 1))
    for c in (1, 8):
        out[f"onyx_regex_vs_free_{c}"] = ratio(get("onyx", "regex", c), get("onyx", "free", c))
    out["onyx_free_8_vs_mlx_free_8"] = ratio(get("onyx", "free", 8), mlx8)
    for r in runs:  # with --base-every: this revision against the base at every client count
        if r["server"] == "onyx-base" and r["clients"] != 1:
            out[f"onyx_{r['load']}_{r['clients']}_vs_base"] = ratio(get("onyx", r["load"], r["clients"]),
                                                                   r["agg_tok_s"])
    return out


def main() -> int:
    ap = harness.arg_parser(__doc__, "clients 1 and 8, one request per client")
    ap.add_argument("--clients", default=None, help="comma-separated client counts (default 1,2,4,8,16)")
    ap.add_argument("--per-client", type=int, default=None, help="requests each client sends (default 2)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--base", default=None, help="revision for onyx-base (default: merge base with main)")
    ap.add_argument("--no-base", action="store_true", help="skip the onyx-base server")
    ap.add_argument("--base-every", action="store_true",
                    help="run onyx-base at every client count (an A/B of two revisions), not at 1 client only")
    ap.add_argument("--no-mlx", action="store_true", help="skip mlx-lm's server")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--mlx-threads", type=int, default=None,
                    help="OpenBLAS threads of mlx-lm's server (default: the threads of Onyx's products)")
    args = ap.parse_args()
    clients = [int(c) for c in (args.clients or ("1,8" if args.quick else "1,2,4,8,16")).split(",")]
    per_client = args.per_client or (1 if args.quick else 2)
    loads = args.loads.split(",")
    out = harness.out_dir(args.out)
    CACHE.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="serve_bench_"))

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("ONYX_API_KEY", None)
    onyx_cmd = [sys.executable, "-m", "onyx.server", "--max-batch", str(args.max_batch), "--max-tokens-limit",
                "2048", "--log-level", "warning"]
    servers = {"onyx": Server("onyx", onyx_cmd, cwd=ROOT, env=env, log_dir=log_dir)}
    meta = {"onyx_cmd": onyx_cmd}
    if not args.no_base:
        servers["onyx-base"], meta["base_revision"] = base_server(
            args.base, [sys.executable, "-m", "onyx.server", "--max-tokens-limit", "2048", "--log-level", "warning"],
            env, log_dir)
    if not args.no_mlx:
        servers["mlx-lm"], mlx_meta = mlx_server(env, log_dir, args.mlx_threads)
        meta.update(mlx_meta)
    runs = []
    try:
        for s in servers.values():
            s.wait_ready()
        models = {"onyx": "onyx", "onyx-base": "onyx", "mlx-lm": meta.get("mlx_model")}
        plan = [(name, load) for name in servers for load in loads
                if not (name == "mlx-lm" and load != "free")]
        for name, load in plan:  # warm-up: compile grammars, fill caches
            one_request(servers[name].base, load, args.max_tokens, models[name])
        print(f"{'server':>9} {'load':>5} {'C':>3} {'req':>4} {'tok':>5} {'tok/s':>7} {'TTFT p50':>9} {'p99':>7} "
              f"{'ITL p50':>8} {'p99':>7}", flush=True)
        for c in clients:
            for rep, (name, load) in enumerate(plan):
                if name == "onyx-base" and c != 1 and not args.base_every:
                    continue
                r = run_load(servers[name], load, c, per_client, args.max_tokens, models[name])
                runs.append(r)
                print(f"{name:>9} {load:>5} {c:>3} {r['requests']:>4} {r['tokens']:>5} {r['agg_tok_s']:>7} "
                      f"{r['ttft_ms_p50']!s:>9} {r['ttft_ms_p99']!s:>7} {r['itl_ms_p50']!s:>8} {r['itl_ms_p99']!s:>7}"
                      + (f"  errors: {r['errors'][:2]}" if r["errors"] else ""), flush=True)
            plan = plan[1:] + plan[:1]  # rotate the order for the next client count
    finally:
        for s in servers.values():
            s.stop()
    data = {"bench": "serve", "machine": harness.machine_meta(), "loadavg": harness.loadavg(),
            "max_tokens": args.max_tokens, "per_client": per_client, "clients": clients, "meta": meta,
            "runs": runs, "targets": targets(runs)}
    print("\ntargets:", json.dumps(data["targets"], indent=1))
    harness.save_results(out, "serve_bench", data, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
