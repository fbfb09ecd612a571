"""docs/benchmarks.md, generated from the measurements in bench/results/*.json.

    python bench/report.py            # rewrites docs/benchmarks.md
    python bench/report.py --check    # exit 1 when docs/benchmarks.md is not what the results give

Each results file gets a section: the command that wrote it (`SOURCES`, with a short note on
reading it), the commit it was measured at, its machine and load, tables drawn from the file in
the bench's own terms (ratios, the peers of the same run), and its plot. The commit is the file's
own (`commit`, `meta.commit` or `machine.commit`: `bench.harness.machine_meta` records it) when
the bench recorded one, else the one `SOURCES` names for that version of the file, else the
commit before the one that last changed the file (benches run on a
checkout, their results are committed after), or HEAD while the file has uncommitted changes:
the same commit before and after the results are committed, so `--check` holds across that
commit. Nothing else (no date, no machine state) enters the output: same inputs, same bytes.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.report_tables import (r_cache, r_cobatch, r_grammar, r_host, r_quant, r_integrations, r_matmul, r_memory,  # noqa: E402
                                 r_long_context,
                                 r_overlap, r_peer_serve, r_phi, r_repair, r_runtime, r_schema, r_serve, r_spec, r_structure, r_vllm,
                                 r_whitespace,
                                 suite_lines)

RESULTS = ROOT / "bench" / "results"
OUT = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Source:
    title: str
    command: str
    render: Callable[[dict], list[str]]
    note: str = ""
    # {commit that last changed the file: commit the run was measured at}, where the run's record says
    measured_at: dict = field(default_factory=dict)


SOURCES: dict[str, Source] = {
    "grammar_bench.json": Source(
        "Grammar core: masks and steps against llguidance, outlines-core and xgrammar",
        "python bench/grammar_bench.py", r_grammar,
        "Three real vocabularies, the same inputs for every engine, each engine in its own worker process; `make "
        "bench` installs the peers and runs it. A step is the next-token mask plus the advance, from Python: for Onyx "
        "a lookup of a precomputed row, so the call overhead is most of it. Peers' masks are sometimes subsets of "
        "Onyx's (they refuse tokens that cross a JSON structure boundary or prefer a canonical tokenization); Onyx "
        "allows every token whose bytes keep the output completable."),
    "structure_bench.json": Source(
        "Structures: segments, triggers and special tokens", "python bench/structure_bench.py", r_structure,
        "Segments cost states, not step time. A special-token trigger is cheaper than the same trigger as text: free "
        "text that must avoid a text trigger tracks how much of it has been written, while no text contains a marker "
        "byte. The index is built lazily, so a large tool set pays only for the states a request visits."),
    "schema_bench_full.json": Source(
        "JSON Schema: every JSONSchemaBench schema, compile only, against llguidance",
        "python bench/schema_bench.py --engines onyx,llguidance --walk-engines none --no-suite", r_schema,
        "Both engines in one run on SmolLM2's vocabulary, 10 s per schema. *Restricted*: the exact automaton was over "
        "a limit and a sound restriction was compiled instead ([json-schema.md](json-schema.md)); *exact* counts the "
        "unrestricted grammars only. Compile-time target (issue 36): p50 ≤ 5 ms and p99 ≤ 500 ms on every set. "
        "Absolute times move with the machine's speed and load: compare Onyx with llguidance in the same run.", {"ea4f772": "4a1ce5e"}),
    "schema_bench_walks.json": Source(
        "JSON Schema: every JSONSchemaBench schema, with walks",
        "python bench/schema_bench.py --engines onyx --no-suite", r_schema,
        "Three random walks per compiled schema, each text parsed strictly and validated by `jsonschema` (formats "
        "checked). *Covered*: compiled and every walk valid. Walks that could not run need every state's row for the "
        "budget-aware mask, past the 2 GB `max_index_bytes` limit; an unbudgeted request builds only the rows it "
        "visits. The one known way to an invalid text is a duplicate extra member name ([json-schema.md]"
        "(json-schema.md)).", {"dd700f5": "e51ad2a"}),
    "schema_bench.json": Source(
        "JSON Schema: the first 100 schemas of each set, with walks and the Test Suite",
        "python bench/schema_bench.py --engines onyx --limit 100", r_schema,
        "A 1,000-schema sample with walks, for quick checks of the validity claim; compile times against llguidance "
        "are the compile-only run's, which times both in one run.", {"ea4f772": "ba13257"}),
    "schema_suite.json": Source(
        "JSON Schema Test Suite (draft 2020-12)", "python bench/schema_bench.py --engines onyx --limit 100",
        suite_lines,
        "That command's Test Suite part (`bench/schema_suite.run_suite`). Instances are written compactly in the "
        "schema's key order and asked to `Grammar.validate`. A false positive (an instance the suite calls invalid "
        "that the grammar accepts) would be a soundness bug. llguidance publishes 934 passes of 1,897 with 38 false "
        "positives."),
    "repair_bench.json": Source(
        "Repair: the intent cost model and the two-stage default against json_repair", "python bench/repair_bench.py",
        r_repair,
        "*Intended*: the repair equals the value the mistake was made from. The intent model's 15 weights were fitted "
        "on the train corpus (`bench/repair_fit.py`) and frozen; the test corpus was never fitted on. The oracle picks "
        "unit, swap or trim costs per case. Cheap deletions weaken the A* heuristic, which shows on long texts with "
        "many random errors."),
    "runtime_bench.json": Source(
        "Runtime: decode speed, mask overhead, paged cache, rollback, prefix sharing", "python bench/runtime_bench.py",
        r_runtime,
        "The default model, float32 on the CPU, greedy, 128 tokens, configurations interleaved. The mask lookup "
        "overlaps the forward, so the grammar costs nothing measurable per step. The gap to the bandwidth floor is "
        "MLX's per-operation cost on the CPU and the Python that builds the graph."),
    "cache_bench.json": Source(
        "Paged KV cache against mlx-lm's cache", "python bench/cache_bench.py --real; python bench/cache_bench.py",
        r_cache,
        "Steps of the two caches interleaved: read the paired ratios. Each run replaces its model's entry (`--real`: "
        "the default model; without: a random model of its shape)."),
    "spec_bench.json": Source(
        "Speculative decoding: grammar-aware drafts and jump-forward", "python bench/spec_bench.py", r_spec,
        "Speedup in decode tok/s over `baseline` (median of per-repetition ratios), greedy, modes round-robin. Drafts "
        "are model-free (forced spans, prompt lookup) or the target drafting for itself (an upper bound on "
        "acceptance, a lower bound on speed). `[0-9]{4}` drafts nothing in `aware` modes (1.00 forwards per token): "
        "its spread is noise. The forward counts are exact."),
    "spec_bench_model_free.json": Source(
        "Speculative decoding, model-free drafts only", "python bench/spec_bench.py --no-draft-model", r_spec,
        "Written as spec_bench.json and kept under this name: no self-draft block; lookup drafts priced per match "
        "length."),
    "serve_bench.json": Source(
        "Serving: many clients against `onyx serve` and mlx-lm's server",
        "python bench/serve_bench.py --clients 1,2,4,8,16 --base 822e667", r_serve,
        "Real servers, streamed greedy chat requests of 64 tokens, 2 per client; `regex` is a sentence of 24-64 "
        "words, `json` the order schema of `bench/corpus.py`. mlx-lm's server has no grammar, so it runs free text, "
        "with as many OpenBLAS threads as Onyx's products use. Single runs vary by 10-20%: compare within a run. "
        "JSON's inter-token latency is low because a step commits several tokens, streamed one delta each."),
    "cobatch_bench.json": Source(
        "Co-batch latency: a heavy request arriving while eight streams decode", "python bench/cobatch_bench.py",
        r_cobatch,
        "Eight greedy free-text streams; in the disturbed rounds a cold Kubernetes Deployment schema, a cold regex "
        "with a token index of about 100 MB and a 2,500-token prompt arrive together one second in; quiet and "
        "disturbed rounds alternate, eight of each, after a warm-up round of each. Gaps between the streams' content "
        "deltas from then to the end of the heavy requests (quiet rounds: to the streams' end, the same part of "
        "their lives). While streams decode, a prompt's tokens may add 0.15 of a plain step's time on average "
        "(`prefill_share`), shortest prompt first; compilations and index builds run at nice 10 (`compile_nice`), "
        "pause during the batch's steps and get 0.15 of a plain step per step between steps (`compile_share`), paid "
        "by padding short steps to 1.15 plain steps. Drafts are priced with step costs measured with a batch's "
        "extra rows where drafts come (`step_cost.json`), so a ninth sequence no longer takes drafts that widen "
        "every stream's attention. The long prompt's first rows take a shared view slot (one more row in the "
        "streams' step) until they would outgrow the slots, instead of an attention of its own from its first "
        "token, which made a step with one of its tokens about 25 ms longer; the prompt now goes in about three "
        "times as fast beside the streams, but the ratio here did not move: 1.26, as the code before it gave "
        "(recorded on another machine; its runs gave 1.26 and 1.40). With both shares also halved while a prompt "
        "and a compilation wait together: 1.27 (median step 1.18 × quiet), so that was left out. The disturbed "
        "median step is about 1.2 × the quiet one: the prompt's share, the compilations' turns and the rows of "
        "the heavy requests themselves once they decode; the gate is not shown met."),
    "long_context_bench.json": Source(
        "Long prompts: time to the first token and per token after it",
        "python bench/long_context_bench.py --base 9ff8807 --lengths 1200,2400", r_long_context,
        "One request at a time, streamed greedy chat, 32 tokens, this repository's docs cut to N tokens of the "
        "model's tokenizer with a first line of its own per request (no prompt cache holds any of it). `onyx-base` "
        "is the commit before a prompt chunk's attention went through the shim (its values product and softmax in "
        "C); mlx-lm's server runs the float32 copy of the same model with OpenBLAS. Per token: the decode's "
        "average after the first token; Onyx's drafts from the prompt (lookup) make summaries cheap per token."),
    "host_bench.json": Source(
        "Host work per decode step", "python bench/host_bench.py", r_host,
        "The engine's greedy steps (`Engine.generate_many`, one row per sequence: `speculative=\"baseline\"`) "
        "against a bare loop of the same forwards (forward, argmax, tokens to Python) on the same runner, paired "
        "step by step. `outside the forward` is measured exactly from the batch's step log: proposing rounds, "
        "committing tokens and the scheduler's delivery of text, from the end of one step's forward and "
        "verification to the start of the next one's. What the engine adds within the forward's span (queuing "
        "it, preparing masks while it runs, verification) is bounded by the paired difference, which comes out "
        "at or below zero: the bare loop is no faster than the engine's step (pairs at one request spread by "
        "about 1-2 ms, at eight by several). On this CPU a decode step's time is the model's forward; the "
        "host's part is about 0.3-0.5 ms a step."),
    "quant_bench.json": Source(
        "Quantized weights on the CPU: decode against the bandwidth floor", "python bench/quant_bench.py", r_quant,
        "The default model loaded as Onyx loads it (4- and 8-bit weights multiplied by the shim as stored) and "
        "with every weight dequantized to float32, decoding one greedy stream in turn. The floor is the bytes "
        "one token's weight products read divided by the bandwidth the shim's one-row float kernel streams "
        "from memory on this machine (a pool of matrices larger than the caches); `floor / decode` is the "
        "share of a token's time those bytes take to arrive. The rest of a token's time is the forward's other "
        "work (attention, norms, MLX's per-operation cost, Python building the graph). Products: the "
        "quantized kernel against the float32 one with the same weights, by rows of x."),
    "vllm_bench.json": Source(
        "Inside vLLM: Onyx's backend beside xgrammar and guidance", "python bench/vllm_bench.py", r_vllm,
        "vLLM 0.32's CPU build (`.venv-vllm`, which `make vllm-env` builds) with SmolLM2-135M-Instruct converted to float32, one process per "
        "structured-output backend, the same work for each, the backends taking turns twice: greedy JSON requests "
        "(three schemas) one and eight at a time after a warm-up, every output checked with jsonschema, with "
        "tokens/s and the median request's time per token after its first (what a step costs, whatever the "
        "output's length); the time vLLM spends filling the batch's "
        "bitmask each step; and a sample of JSONSchemaBench schemas (the same for each backend, chosen by a hash "
        "of the file name) through vLLM's request validation and the backend's compile, cold. Onyx validates by "
        "compiling, so its compile time is the first compile; xgrammar and guidance compile more ahead (their "
        "masks), Onyx builds a state's mask on its first visit, which shows in the mask p99. The backends' "
        "whitespace defaults differ, so their greedy outputs (and lengths) differ."),
    "peer_serve_bench.json": Source(
        "Serving beside llama.cpp on the same GGUF", "python bench/peer_serve_bench.py", r_peer_serve,
        "Onyx's server and llama.cpp's `llama-server` (b11434, built for this CPU by `bench/llama_server.py`, 8 "
        "slots) on the same SmolLM2-135M-Instruct Q4_1 file, the same number of threads, greedy streamed chat "
        "requests. Both compute on the 4-bit weights as stored. "
        "`grammar`: Onyx's `regex`, llama.cpp the same language in GBNF; `json`: `response_format` on both. "
        "Every constrained answer is checked; one cut off by `max_tokens` before it is complete is invalid. "
        "The targets are the issue's, on aggregate tokens/s; Onyx's JSON answers are longer (more tokens per "
        "answer), so answers/s is the fairer figure for that load. `free` answers all stop at `max_tokens` "
        "(cut off, not invalid)."),
    "matmul_bench.json": Source(
        "Few-row products x @ Wᵀ: the BLAS shim's kernels", "python bench/matmul_bench.py", r_matmul,
        "SmolLM2-135M's weight shapes, each call on another copy of W from a 512 MB pool, variants interleaved call by "
        "call. Past about 8 rows the multiply-adds bind, not the weight stream. The split keeps each output's "
        "additions in order, so a row's bits depend neither on the split nor on the rows beside it."),
    "matmul_bench_pieces.json": Source(
        "Few-row products: 9-12-row tiles and 33-256-row pieces",
        "python bench/matmul_bench.py --before 029e840 --rows 1,8,9,12,33,64,256 --pool-mb 256 --reps 2", r_matmul,
        "With AVX-512's 32 registers a tile holds 24 accumulators, so 9-12 rows run as one group; weight products of "
        "33-512 rows run in pieces of at most 32 rows, split between two threads."),
    "matmul_bench_small_k.json": Source(
        "Few-row products: attention-sized K stays with OpenBLAS",
        "python bench/matmul_bench.py --before 99c97c2 --rows 33,64,256 --shape 512x64 --shape 2048x64 "
        "--pool-mb 64 --reps 3", r_matmul,
        "With a small K (attention scores over a prompt chunk) the pieces lose to OpenBLAS, so the shim takes pieces "
        "for weight-sized K (≥ 256) only."),
    "overlap_bench.json": Source(
        "Overlapped layers on the CPU", "python bench/batch_json_bench.py --overlap --models smollm2,gemma3-270m",
        r_overlap,
        "The same forwards with every second layer starting its own evaluation, switched on and off, alternated; "
        "logits bit-identical. The gain is the Python graph-building time hidden behind compute."),
    "integrations_bench.json": Source(
        "mlx-lm logits processor", "python bench/integrations_bench.py", r_integrations,
        "mlx-lm's own `stream_generate` on the default model, greedy, 128 tokens, runs interleaved. llguidance's "
        "kernel is Metal-only; on Linux its bitmask is applied with one MLX select, a fair CPU stand-in. Whole-run "
        "ratios swing by several percent under load; the processor's own time per token is the steadier figure."),
    "phi_bench.json": Source(
        "Φ reweighting: distance to the model's law given validity", "python bench/phi_bench.py", r_phi,
        "Total variation (TV) to μ\\*, the model's law given a valid output; plain masking samples μ^proj. The floor "
        "is the expected TV of N samples from μ\\* itself. The Φ paper's Table 2 (D(3,16)): 0.418 / 0.359 / 0.014. "
        "OneStep sees only the next token's validity, so it can be worse than masking. Exact Φ costs a trie scoring "
        "before decoding, not per-token time."),
    "whitespace_bench.json": Source(
        "JSON whitespace: which default keeps the model's own choices",
        "python bench/whitespace_bench.py --schema-sample 10", r_whitespace,
        "The default model answers each prompt through `Engine.chat_many` under each `max_whitespace` setting (up to "
        "N whitespace characters wherever JSON allows whitespace; `ws=1` is the smallest that allows `{\"a\": 1}`), "
        "and every output is scored by the same model without a constraint, teacher-forced after the same prompt: "
        "the higher its log-probability, the less the constraint moved the model off its own choices. The "
        "recommendation goes by the total log-prob per output: a per-token mean favours outputs with many easy "
        "(whitespace) tokens."),
    "memory_bench.json": Source(
        "Memory: the largest schemas compiled and walked",
        "python bench/memory_bench.py --index-from <an earlier memory_bench.json> --before <the same>", r_memory,
        "Each of the 50 largest JSONSchemaBench schemas (by the size of their JSON text, and by the size of the whole "
        "token index an eager run recorded, where the memory went) in a fresh worker process, "
        "its address space capped: the peak resident memory after setup (vocabulary and engine), after compiling, "
        "and after the walks, which build only the rows they visit and the distances budget-aware masks need (as a "
        "request does). The earlier run kept beside it is named by its commit and whether it built the whole index "
        "first."),
}


# -- provenance --------------------------------------------------------------------------------

def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def measured_at(path: Path, data, source: Source | None) -> str:
    """The commit a results file was measured at (see the module docstring), or 'unknown'."""
    holders = [data] + ([data.get("meta"), data.get("machine")] if isinstance(data, dict) else [])
    for holder in holders:
        if isinstance(holder, dict) and isinstance(holder.get("commit"), str):
            commit = holder["commit"]
            return commit[:7] + (" (with uncommitted changes)" if commit.endswith("-dirty") else "")
    top = _git(path.parent, "rev-parse", "--show-toplevel")
    if top is None:
        return "unknown"
    rel = str(path.resolve().relative_to(Path(top).resolve()))
    clean = _git(Path(top), "ls-files", "--error-unmatch", rel) is not None and \
        _git(Path(top), "diff", "--quiet", "HEAD", "--", rel) is not None
    if not clean:
        head = _git(Path(top), "rev-parse", "HEAD")
        return head[:7] if head else "unknown"
    last = _git(Path(top), "log", "-1", "--format=%H", "--", rel) or ""
    if source and last[:7] in source.measured_at:
        return source.measured_at[last[:7]]
    parent = _git(Path(top), "rev-parse", "--verify", "--quiet", last + "^") if last else None
    return (parent or last or "unknown")[:7]


def machine(d) -> str:
    if not isinstance(d, dict):
        return ""
    meta = d.get("meta") if isinstance(d.get("meta"), dict) else {}
    m = next((x for x in (meta.get("machine"), d.get("machine")) if isinstance(x, dict)), {})
    cpus = m.get("cpus") or meta.get("cpus") or meta.get("cpu_count") or d.get("cpus")
    platform = m.get("platform") or meta.get("platform") or d.get("platform") or m.get("machine") or meta.get("machine")
    parts = [f"{cpus} cores" if cpus else None, platform if isinstance(platform, str) else None]
    for key, holder in (("loadavg_before_after", meta), ("loadavg_start", meta), ("loadavg", d), ("load", d)):
        if isinstance(holder.get(key), list):
            loads = holder[key] if isinstance(holder[key][0], list) else [holder[key]] + (
                [meta["loadavg_end"]] if key == "loadavg_start" and "loadavg_end" in meta else [])
            parts.append("load average " + " → ".join(" ".join(f"{x:.2f}" for x in la) for la in loads))
            break
    versions = meta.get("versions")
    if isinstance(versions, dict):
        parts.append(", ".join(f"{k} {v}" for k, v in versions.items() if v))
    return "; ".join(p for p in parts if p)


# -- the document ------------------------------------------------------------------------------

HEADER = """# Benchmarks

Generated by `python bench/report.py` from `bench/results/*.json` (do not edit; `--check` fails
when this file is stale). Each section names the command that wrote its results and the commit it
was measured at. The machines are shared and noisy (2 cores): compare ratios and peers within one
run, not absolute times across runs. How the numbers got here: [CHANGELOG.md](../CHANGELOG.md).
"""


def anchor(title: str) -> str:
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")  # as GitHub makes them
    return keep.replace(" ", "-")


def generate(results: Path = RESULTS) -> str:
    files = sorted(results.glob("*.json"))
    order = {name: i for i, name in enumerate(SOURCES)}
    files.sort(key=lambda p: (order.get(p.name, len(order)), p.name))
    sections, toc = [], []
    for path in files:
        data = json.loads(path.read_text())
        source = SOURCES.get(path.name)
        title = source.title if source else path.stem
        toc.append(f"- [{title}](#{anchor(title)})")
        command = source.command if source else "unknown: add an entry to SOURCES in bench/report.py"
        lines = [f"## {title}", "", f"- Command: `{command}`", f"- Measured at: `{measured_at(path, data, source)}`"]
        info = machine(data)
        lines += [f"- Machine: {info}"] if info else []
        lines += [f"- Results: [`bench/results/{path.name}`](../bench/results/{path.name})", ""]
        if source and source.note:
            lines += [source.note, ""]
        lines += source.render(data) if source else [
            "No entry in `SOURCES` yet; top-level keys: " + ", ".join(f"`{k}`" for k in data) + ".", ""]
        plot = path.with_suffix(".png")
        if plot.exists():
            lines += [f"![{path.stem}](../bench/results/{plot.name})", ""]
        sections.append("\n".join(lines).rstrip() + "\n")
    return HEADER + "\n" + "\n".join(toc) + "\n\n" + "\n".join(sections)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/benchmarks.md is stale, without writing")
    ap.add_argument("--results", type=Path, default=RESULTS, help="results folder (default bench/results)")
    ap.add_argument("--out", type=Path, default=OUT, help="document to write or check (default docs/benchmarks.md)")
    args = ap.parse_args(argv)
    text = generate(args.results)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current == text:
            return 0
        diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), str(args.out), "generated",
                                         lineterm="", n=1))
        print(f"{args.out} is stale: run `python bench/report.py` and commit the result.", *diff[:40],
              *(["..."] if len(diff) > 40 else []), sep="\n", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
