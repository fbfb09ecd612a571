#!/usr/bin/env python3
"""Cost of Onyx's mlx-lm logits processor, in one run on the default model (SmolLM2-135M):

  1. decode tok/s of mlx-lm's own `stream_generate` (greedy, `generation_tps` as mlx-lm reports
     it) with no processor, with `onyx.integrations.mlx_lm.GrammarLogitsProcessor`, and with a
     processor built on llguidance's mlx integration (`llguidance.mlx`: an `LLMatcher` fills a
     bitmask, `apply_token_bitmask` applies it), on the same grammars: a full-mask regex
     `(?s:.)*` (every text token stays allowed, so the greedy tokens are the unconstrained ones
     and any slowdown is the processor's), `[a-z ]+`, and a JSON schema. Runs are interleaved
     (none, onyx, llguidance, then rotated) so all see the same machine load; the numbers to
     read are the medians of the paired ratios to the unconstrained run of the same repetition.
  2. the processors' own time per token, out of the decoding loop: each processor is fed the
     tokens of a recorded greedy run (already evaluated) and its masked logits are evaluated;
     median microseconds per call.
  3. what a processor costs to make: the first (vocabulary, tokenizer self-test, compile) and a
     second one for the same pattern (cached), against llguidance's tokenizer and matcher.

llguidance's `apply_token_bitmask` is a Metal kernel; where MLX has no Metal back-end (Linux,
`mlx[cpu]`) the bench applies the same bitmask on the CPU instead (numpy unpacks it, one MLX
select applies it), says so, and also times llguidance's matcher alone.

    python bench/integrations_bench.py             # full run (about 6-10 minutes on 2 cores)
    python bench/integrations_bench.py --quick --out /tmp/ib

Prints one table, writes integrations_bench.json to --out (default bench/results). Targets
(reported, not asserted): Onyx's processor costs <= 3% of unconstrained tok/s, and is ahead of
llguidance's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import time  # noqa: E402

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
from mlx_lm import stream_generate  # noqa: E402

from bench.corpus import CHARACTER_SCHEMA, JSON_ASK, STORY  # noqa: E402
from onyx.chat.setup import chat_ids
from onyx.integrations import common  # noqa: E402
from onyx.integrations.mlx_lm import GrammarLogitsProcessor  # noqa: E402
from onyx.models.loader import load  # noqa: E402

FULL_MASK = r"(?s:.)*"
LOWER = r"[a-z ]+"
# (key, label, prompt, constraint)
GRAMMARS = [
    ("full_mask", f"regex {FULL_MASK} (full mask)", STORY, {"regex": FULL_MASK}),
    ("lower", f"regex {LOWER}", STORY, {"regex": LOWER}),
    ("json_schema", "JSON schema (character)", JSON_ASK, {"json_schema": CHARACTER_SCHEMA}),
]
MODES = ("none", "onyx", "llguidance")
NEG_INF = float("-inf")


# --------------------------------------------------------------------------------------------
# llguidance as an mlx-lm processor
# --------------------------------------------------------------------------------------------


class _CpuBitmask:
    """`llguidance.mlx.apply_token_bitmask` without its Metal kernel, as fast as we could make it
    on the CPU: numpy unpacks the int32 bitmask (bit t%32 of word t//32 keeps logit t) and one
    MLX select applies it."""

    def __init__(self, width: int) -> None:
        self.width = width

    def __call__(self, logits: mx.array, mask_np: np.ndarray) -> mx.array:
        keep = np.unpackbits(mask_np.reshape(-1).view(np.uint8), bitorder="little")[:self.width]
        return mx.where(mx.array(keep.astype(np.bool_)), logits, NEG_INF)


def llguidance_apply(width: int):
    """llguidance's mlx bitmask application, or the CPU stand-in where there is no Metal; and
    which one it is."""
    from llguidance.mlx import apply_token_bitmask

    probe = np.full((1, (width + 31) // 32), -1, dtype=np.int32)
    try:
        mx.eval(apply_token_bitmask(mx.zeros((1, width)), probe))
        return apply_token_bitmask, "llguidance.mlx.apply_token_bitmask (Metal kernel)"
    except RuntimeError as e:  # "[metal_kernel] No Metal back-end."
        return _CpuBitmask(width), f"numpy unpack + one MLX select (llguidance.mlx's kernel: {e})"


class LLGuidanceProcessor:
    """An mlx-lm processor on llguidance: the matcher consumes the last sampled token, fills the
    next bitmask (llguidance.numpy), and the bitmask is applied to the logits."""

    def __init__(self, lltok, grammar: str, width: int, apply) -> None:
        import llguidance

        self.matcher = llguidance.LLMatcher(lltok, grammar, log_level=0)
        if self.matcher.is_error():
            raise RuntimeError(f"llguidance: {self.matcher.get_error()}")
        from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

        self.fill = fill_next_token_bitmask
        self.mask = allocate_token_bitmask(1, width)
        self.apply = apply
        self.start = None

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if self.start is None:
            self.start = tokens.size
        elif not self.matcher.consume_token(int(tokens[-1].item())):
            raise RuntimeError(f"llguidance rejected a token: {self.matcher.get_error()}")
        self.fill(self.matcher, self.mask)
        return self.apply(logits, self.mask)


def llguidance_grammar(constraint: dict) -> str:
    import llguidance

    M = llguidance.LLMatcher
    if "regex" in constraint:
        return M.grammar_from_regex(constraint["regex"])
    # Compact JSON, the layout Onyx writes when max_whitespace=0 (its default allows one
    # whitespace character where JSON allows whitespace).
    return M.grammar_from_json_schema(constraint["json_schema"], overrides={
        "whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


class Setup:
    """The model, its tokenizer, and how to make each mode's processor."""

    def __init__(self) -> None:
        self.loaded = load()
        self.tok = self.loaded.tokenizer
        self.width = self.loaded.vocab_size
        try:
            import llguidance.hf
        except ImportError:  # the bench extra is not installed: Onyx against no processor only
            self.modes = MODES[:2]
            self.ll_apply_kind = "llguidance is not installed (the bench extra: make bench)"
            return
        self.modes = MODES
        t = time.perf_counter()
        self.lltok = llguidance.hf.from_tokenizer(self.tok._tokenizer, n_vocab=self.width,
                                                  eos_token=self.loaded.eos_token_ids[0])
        self.lltok_s = time.perf_counter() - t
        self.ll_apply, self.ll_apply_kind = llguidance_apply(self.width)
        self.ll_grammars = {key: llguidance_grammar(c) for key, _, _, c in GRAMMARS}

    def processor(self, mode: str, key: str, constraint: dict, max_tokens: int):
        if mode == "none":
            return None
        if mode == "onyx":
            return GrammarLogitsProcessor(self.tok, max_tokens=max_tokens, **constraint)
        return LLGuidanceProcessor(self.lltok, self.ll_grammars[key], self.width, self.ll_apply)

    def prompt(self, text: str) -> list[int]:
        return chat_ids(self.loaded, [{"role": "user", "content": text}])


def generate_once(s: Setup, prompt: list[int], processor, max_tokens: int) -> dict:
    tokens, last = [], None
    for r in stream_generate(s.loaded.model, s.tok, prompt, max_tokens=max_tokens,
                             logits_processors=[processor] if processor is not None else None):
        tokens.append(r.token)
        last = r
    eos = set(s.loaded.eos_token_ids)
    out = [t for t in tokens if t not in eos]
    text = s.tok.decode(out)
    return {"tok_s": last.generation_tps, "tokens": len(out), "token_ids": out, "text": text}


def decode_section(s: Setup, max_tokens: int, reps: int) -> dict:
    """1: tok/s per grammar and mode, interleaved, with paired ratios."""
    out = {}
    for key, label, text, constraint in GRAMMARS:
        prompt = s.prompt(text)
        check = GrammarLogitsProcessor(s.tok, **constraint)
        modes = s.modes
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for rep in range(reps):
            order = modes[rep % len(modes):] + modes[:rep % len(modes)]
            for mode in order:
                r = generate_once(s, prompt, s.processor(mode, key, constraint, max_tokens), max_tokens)
                r["valid"] = None if mode == "none" else check.matches(r["text"])
                runs[mode].append(r)
            print(f"  {key} rep {rep + 1}/{reps}: " + ", ".join(f"{m} {runs[m][-1]['tok_s']:.1f}" for m in modes),
                  flush=True)
        entry = {"label": label, "modes": {}}
        for mode in modes:
            rates = [r["tok_s"] for r in runs[mode]]
            entry["modes"][mode] = {
                "tok_s_median": harness.median(rates),
                "runs": [{k: r[k] for k in ("tok_s", "tokens", "valid")} for r in runs[mode]],
            }
            if mode != "none":
                ratios = harness.paired_ratios(rates, [r["tok_s"] for r in runs["none"]])
                entry["modes"][mode]["median_paired_ratio"] = harness.median(ratios)
                entry["modes"][mode]["overhead"] = 1.0 - harness.median(ratios)
        entry["same_tokens_as_unconstrained"] = {
            m: all(a["token_ids"] == b["token_ids"] for a, b in zip(runs[m], runs["none"])) for m in modes[1:]}
        if "llguidance" in runs:
            onyx_r = harness.paired_ratios([r["tok_s"] for r in runs["onyx"]], [r["tok_s"] for r in runs["llguidance"]])
            entry["onyx_vs_llguidance_paired"] = harness.median(onyx_r)
            entry["same_tokens_onyx_llguidance"] = all(
                a["token_ids"] == b["token_ids"] for a, b in zip(runs["onyx"], runs["llguidance"]))
        entry["sample"] = {m: runs[m][-1]["text"][:160] for m in modes}
        # each processor is timed below on a run of its own: the two JSON languages differ in
        # whitespace (Onyx allows one character where JSON allows whitespace, llguidance's is compact)
        entry["recorded_tokens"] = {m: runs[m][-1]["token_ids"] for m in modes if m != "none"}
        out[key] = entry
    return out


def processor_section(s: Setup, decode: dict, max_tokens: int, reps: int) -> dict:
    """2: each processor's own time per call, fed a recorded greedy run's tokens."""
    out = {}
    for key, _label, text, constraint in GRAMMARS:
        prompt = s.prompt(text)
        recorded = decode[key]["recorded_tokens"]
        logits = mx.random.normal((1, s.width))
        mx.eval(logits)
        per_mode = {}
        for mode in s.modes[1:]:
            tokens = recorded[mode]
            arrays = [mx.array(prompt + tokens[:n]) for n in range(len(tokens) + 1)]
            mx.eval(arrays)
            times = []
            for _ in range(reps):
                p = s.processor(mode, key, constraint, max_tokens)
                for a in arrays:
                    t = time.perf_counter()
                    mx.eval(p(a, logits))
                    times.append(time.perf_counter() - t)
            per_mode[mode] = {"median_us": harness.median(times) * 1e6, "mean_us": float(np.mean(times)) * 1e6,
                              "calls": len(times)}
        if "llguidance" in s.modes:  # its matcher alone: consume the token, fill the bitmask
            tokens = recorded["llguidance"]
            times = []
            for _ in range(reps):
                p = s.processor("llguidance", key, constraint, max_tokens)
                for n in range(len(tokens) + 1):
                    t = time.perf_counter()
                    if n:
                        p.matcher.consume_token(tokens[n - 1])
                    p.fill(p.matcher, p.mask)
                    times.append(time.perf_counter() - t)
            per_mode["llguidance_matcher_only_us"] = harness.median(times) * 1e6
        unmasked = []
        for _ in range(reps):
            for _a in arrays:
                t = time.perf_counter()
                mx.eval(logits - 0.0)
                unmasked.append(time.perf_counter() - t)
        per_mode["eval_only_us"] = harness.median(unmasked) * 1e6
        out[key] = per_mode
    return out


def construction_section(s: Setup) -> dict:
    """3: making a processor, first and cached, against llguidance."""
    common.clear_caches()  # the first processor builds the vocabulary again
    constraint = {"json_schema": CHARACTER_SCHEMA}
    t = time.perf_counter()
    GrammarLogitsProcessor(s.tok, **constraint)
    first = time.perf_counter() - t
    t = time.perf_counter()
    GrammarLogitsProcessor(s.tok, **constraint)
    cached = time.perf_counter() - t
    out = {"onyx_first_s": first, "onyx_cached_s": cached}
    if "llguidance" not in s.modes:
        return out
    import llguidance

    grammar = llguidance_grammar(constraint)
    t = time.perf_counter()
    llguidance.LLMatcher(s.lltok, grammar, log_level=0)
    matcher = time.perf_counter() - t
    return {**out, "llguidance_tokenizer_s": s.lltok_s, "llguidance_matcher_s": matcher}


def run(quick: bool, out: Path, max_tokens: int | None = None, reps: int | None = None) -> dict:
    max_tokens = max_tokens or (32 if quick else 128)  # the JSON schema needs 22 tokens at least
    reps = reps or (1 if quick else 5)
    s = Setup()
    print(f"model {s.loaded.name} ({s.loaded.device}, {s.loaded.dtype}); llguidance bitmask: {s.ll_apply_kind}")
    print(f"load average {harness.loadavg()}")
    decode = decode_section(s, max_tokens, reps)
    processor = processor_section(s, decode, max_tokens, 1 if quick else 3)
    construction = construction_section(s)
    for entry in decode.values():
        entry.pop("recorded_tokens")
    # The processor's own time as a share of an unconstrained step: a reading of the overhead
    # that the machine's load does not drown (the paired tok/s ratios carry its noise).
    for k in processor:
        step_us = 1e6 / decode[k]["modes"]["none"]["tok_s_median"]
        for mode in s.modes[1:]:
            processor[k][mode]["share_of_step"] = processor[k][mode]["median_us"] / step_us
    targets = {
        "onyx_overhead_le_3pct": {
            "holds": all(decode[k]["modes"]["onyx"]["overhead"] <= 0.03 for k in decode),
            "overhead": {k: decode[k]["modes"]["onyx"]["overhead"] for k in decode},
            "processor_share_of_step": {k: processor[k]["onyx"]["share_of_step"] for k in processor}},
    }
    if "llguidance" in s.modes:
        targets["onyx_ahead_of_llguidance"] = {
            "holds": all(decode[k]["onyx_vs_llguidance_paired"] >= 1.0 for k in decode)
            and all(processor[k]["onyx"]["median_us"] < processor[k]["llguidance"]["median_us"] for k in processor),
            "paired_tok_s_ratio": {k: decode[k]["onyx_vs_llguidance_paired"] for k in decode}}
    data = {
        "meta": {**harness.machine_meta(), "quick": quick, "max_tokens": max_tokens, "reps": reps,
                 "loadavg_end": harness.loadavg(), "llguidance_bitmask": s.ll_apply_kind,
                 "versions": {p: harness.package_version(p) for p in ("mlx", "mlx-lm", "llguidance")}},
        "decode": decode, "processor_us": processor, "construction": construction, "targets": targets,
    }
    print_table(data)
    harness.save_results(harness.out_dir(out), "integrations_bench", data)
    return data


def print_table(data: dict) -> None:
    meta = data["meta"]
    ll = "llguidance" in next(iter(data["decode"].values()))["modes"]
    print(f"\n1. mlx-lm stream_generate, greedy, {meta['max_tokens']} tokens, {meta['reps']} reps "
          f"(medians; ratios paired per repetition); llguidance: {meta['llguidance_bitmask']}")
    head = f"{'grammar':32} {'none tok/s':>10} {'onyx tok/s':>10} {'onyx/none':>10}"
    print(head + (f" {'llg tok/s':>10} {'llg/none':>9} {'onyx/llg':>9}" if ll else ""))
    for entry in data["decode"].values():
        m = entry["modes"]
        row = (f"{entry['label']:32} {m['none']['tok_s_median']:10.1f} {m['onyx']['tok_s_median']:10.1f} "
               f"{m['onyx']['median_paired_ratio']:10.3f}")
        if ll:
            row += (f" {m['llguidance']['tok_s_median']:10.1f} {m['llguidance']['median_paired_ratio']:9.3f} "
                    f"{entry['onyx_vs_llguidance_paired']:9.3f}")
        print(row)
    print("\n2. processor time per call, tokens of a recorded run (median µs; eval of unmasked logits for scale)")
    for key, p in data["processor_us"].items():
        other = (f"   llguidance {p['llguidance']['median_us']:8.1f} ({p['llguidance']['share_of_step']:.2%}; "
                 f"matcher alone {p['llguidance_matcher_only_us']:.1f})" if ll else "")
        print(f"{key:32} onyx {p['onyx']['median_us']:8.1f} ({p['onyx']['share_of_step']:.2%} of a step){other}"
              f"   eval only {p['eval_only_us']:6.1f}")
    c = data["construction"]
    line = (f"\n3. making a processor (JSON schema): onyx first {c['onyx_first_s'] * 1e3:.0f} ms (vocabulary, "
            f"self-test, compile), cached {c['onyx_cached_s'] * 1e3:.2f} ms")
    if ll:
        line += (f"; llguidance tokenizer {c['llguidance_tokenizer_s'] * 1e3:.0f} ms, matcher "
                 f"{c['llguidance_matcher_s'] * 1e3:.2f} ms")
    print(line)
    for name, t in data["targets"].items():
        print(f"target {name}: {'met' if t['holds'] else 'NOT met'}")
    print(f"load average {meta['loadavg_end']}")


def main(argv=None) -> int:
    ap = harness.arg_parser(__doc__, "few tokens, one repetition (smoke test)")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None)
    a = ap.parse_args(argv)
    run(a.quick, a.out, max_tokens=a.max_tokens, reps=a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
