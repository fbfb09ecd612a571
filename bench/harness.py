"""What every bench script shares: its command line (`--quick`, `--out`), timing helpers,
machine metadata, writing the results JSON and plots, and a worker process with a timeout.

A bench script begins with

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import harness

so that `python bench/X_bench.py` finds this package (and, in a source checkout, `onyx`).
Importing this module imports `onyx` first: on Linux that loads OpenBLAS before anything
imports `mlx.core` (MLX's bundled BLAS is ~40x slower on the model's matrix products).
"""

from __future__ import annotations

import onyx.cpu  # noqa: F401, I001  (OpenBLAS before mlx.core)

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def arg_parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """A parser with the options every bench has: `--quick` and `--out` (a folder, default
    bench/results). The script's docstring is its help text."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--out", type=Path, default=RESULTS, help="output folder (default bench/results)")
    return ap


def out_dir(path: Path | str) -> Path:
    """The output folder, created if missing."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def median(xs) -> float:
    """Median of the numbers in `xs`, None and NaN left out; NaN when nothing is left."""
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(xs) if xs else float("nan")


def paired_ratios(a, b) -> list[float]:
    """a[i] / b[i] for every pair with b[i] > 0. Measurements taken side by side (same
    repetition, same step) share the machine's load, so their ratios cancel its drift."""
    return [x / y for x, y in zip(a, b) if y > 0]


def repeat(fn: Callable[[], Any], reps: int, budget_s: float) -> list:
    """The results of up to `reps` calls of fn() (at least one), stopping once the calls have
    taken `budget_s` seconds in total."""
    out = []
    start = time.perf_counter()
    for _ in range(reps):
        out.append(fn())
        if time.perf_counter() - start > budget_s:
            break
    return out


def timed(fn: Callable[[], Any], reps: int, budget_s: float = 2.0) -> tuple[Any, list[float]]:
    """(the last call's result, seconds per call) over `repeat(fn, reps, budget_s)`."""
    def one():
        t = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - t

    runs = repeat(one, reps, budget_s)
    return runs[-1][0], [s for _, s in runs]


def timer_overhead_ns(samples: int = 20_000) -> float:
    """Median of two back-to-back `perf_counter_ns` calls: what a timed region costs empty."""
    pc = time.perf_counter_ns
    xs = []
    for _ in range(samples):
        t0 = pc()
        t1 = pc()
        xs.append(t1 - t0)
    return float(np.median(xs))


# --------------------------------------------------------------------------------------------
# Machine metadata
# --------------------------------------------------------------------------------------------


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_meta() -> dict:
    """CPU count, platform string, Python version, the C allocator of this process (see
    `start_like_a_server`) and the commit measured (`commit`: `git describe --always --dirty` of
    this checkout, which bench/report.py cites)."""
    from onyx.cpu.malloc import allocator

    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "allocator": allocator(), "commit": checkout_commit()}


def start_like_a_server() -> None:
    """For a bench that runs the model in its own process: restarts it under the allocator
    Onyx's server and CLI run on (jemalloc on Linux where installed; `onyx.cpu.malloc`), so it
    measures what they do. Call it first in `main`."""
    from onyx.cpu.malloc import restart_with_fast_allocator

    restart_with_fast_allocator()


def checkout_commit() -> str | None:
    """This checkout's commit (`-dirty` with uncommitted changes); None outside git."""
    import subprocess

    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def package_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def _jsonable(o):
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if math.isnan(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def write_json(path: Path, data) -> Path:
    """Writes `data` as indented JSON (numpy scalars as numbers, anything else unknown as a
    string) and returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=_jsonable) + "\n")
    return path


def save_results(out_dir: Path, name: str, data, plot: Callable | None = None) -> list[Path]:
    """Writes NAME.json into out_dir and, when `plot(data, png_path)` is given and draws
    (returns something true), NAME.png; says so on stdout and returns the paths written."""
    out_dir = Path(out_dir)
    written = [write_json(out_dir / f"{name}.json", data)]
    if plot is not None and plot(data, out_dir / f"{name}.png"):
        written.append(out_dir / f"{name}.png")
    print("\nwrote " + " and ".join(str(p) for p in written))
    return written


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (with a note on stderr) when matplotlib is
    not installed: benches then write no plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    return plt


def save_figure(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------
# A worker process with a timeout
# --------------------------------------------------------------------------------------------


def _worker_main(conn, setup: Callable, args: tuple) -> None:
    try:
        obj, info = setup(*args)
        conn.send(("ready", info))
    except Exception as e:  # noqa: BLE001 - reported to the parent as this worker's error
        conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            return
        fn, payload = msg
        try:
            conn.send(("ok", fn(obj, payload)))
        except Exception as e:  # noqa: BLE001 - one failed call is that call's error
            conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))


class Worker:
    """A spawned process holding the object `setup(*args)` builds (setup returns it and a dict
    of setup info). `run(fn, payload, timeout)` calls fn(obj, payload) there; a call, or the
    setup, that takes longer than its timeout kills the process and comes back as an error.
    `setup` and `fn` must be module-level functions (they are pickled by name)."""

    def __init__(self, setup: Callable, args: tuple, timeout: float):
        ctx = mp.get_context("spawn")
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, setup, args), daemon=True)
        self.proc.start()
        child.close()
        self.info: dict | None = None
        self.error: str | None = None
        msg = self._recv(timeout)
        if msg is None:
            self.error = f"engine setup timed out after {timeout:.0f} s"
        elif msg[0] == "ready":
            self.info = msg[1]
        else:
            self.error = f"engine setup failed: {msg[1]}"
        if self.error:
            self.close()

    def _recv(self, timeout: float):
        try:
            if self.parent.poll(timeout):
                return self.parent.recv()
        except (EOFError, OSError):
            return ("error", f"worker died (exit code {self.proc.exitcode})", "")
        return None

    def run(self, fn: Callable, payload, timeout: float) -> tuple[Any, str | None]:
        """(result, None), or (None, the error) when the call raised, the worker died or the
        call timed out (the worker is then killed)."""
        self.parent.send((fn, payload))
        msg = self._recv(timeout)
        if msg is None:
            self.close()
            return None, f"timed out after {timeout:.0f} s (worker killed)"
        if msg[0] == "ok":
            return msg[1], None
        return None, msg[1]

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                self.parent.send(None)
                self.proc.join(2)
            except (BrokenPipeError, OSError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
