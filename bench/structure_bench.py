"""Structures (`Vocabulary.compile_structure`): what segments, triggers and special tokens cost.

On the Qwen2 (152,064 tokens) and SmolLM2 (49,152) vocabularies, for each structure: compile
time, DFA states, time to the first mask, eager build of every state's mask, index memory, and
the per-step time (mask + advance, from Python) along a random walk. The structures:

- `free_text`: `(?s:.)*` as a regex, the all-tokens baseline every free-text row is measured by;
- `until_text` / `until_token`: free text, a trigger, then a JSON Schema, with the trigger once
  as text and once as a special token (a marker byte: the design of special tokens, measured
  against the same structure without it);
- `reasoning_json`: `<think>` block, `</think>`, then a JSON Schema;
- `tools_required` / `tools_auto`: 22 tools (tests/tool_schemas.py) in the model's format
  (DeepSeek-R1's on Qwen2, the Hermes fallback on SmolLM2).

    python bench/structure_bench.py [--quick] [--vocabs qwen2 smollm2]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402

import random  # noqa: E402

import onyx  # noqa: E402
from onyx.chat import reasoning as R  # noqa: E402
from onyx.grammar import structure as st  # noqa: E402
from onyx.chat import tools as T  # noqa: E402
from onyx.chat.template import ChatTemplate  # noqa: E402
from onyx.models import assets  # noqa: E402
from onyx.options import ToolChoice, parse_tool_choice, parse_tools  # noqa: E402

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"enum": [1, 2, 3]}},
          "required": ["city", "days"], "additionalProperties": False}
VOCABS = {"qwen2": ("qwen2-tokenizer", "<|quad_start|>"), "smollm2": ("smollm2", "<|im_start|>")}


def structures(vocab, template, special: str) -> dict:
    sys.path.insert(0, str(harness.ROOT / "tests"))
    from tool_schemas import TOOLS

    fns = parse_tools(TOOLS)
    required = T.plan(template, vocab, fns, parse_tool_choice("required", fns))
    auto = T.spec(required.format, vocab, fns, ToolChoice("auto"))
    return {
        "free_text": ("regex", "(?s:.)*"),
        "until_text": ("structure", [st.until(special), st.json_schema(SCHEMA)]),
        "until_token": ("structure", [st.until(st.token(special)), st.json_schema(SCHEMA)]),
        "reasoning_json": ("structure", R.structure(R.ThinkingFormat(), st.json_schema(SCHEMA), vocab,
                                                    require_thinking=True)),
        "tools_required": ("structure", required.spec),
        "tools_auto": ("structure", auto),
    }


def compile_one(vocab, kind: str, spec):
    return vocab.compile_regex(spec) if kind == "regex" else vocab.compile_structure(spec)


def measure(vocab, kind: str, spec, steps: int, reps: int) -> dict:
    g, compile_s = harness.timed(lambda: compile_one(vocab, kind, spec), reps)
    first = []
    for _ in range(reps):
        fresh = compile_one(vocab, kind, spec)
        _, t = harness.timed(lambda: fresh.token_bitmask(fresh.initial_state), 1)
        first.append(t[0])
    _, build_s = harness.timed(g.build_all, 1)
    # A random walk, then timed mask + advance along it (every row is built by now).
    rng = random.Random(0)
    state, walk = g.initial_state, []
    eos = set(vocab.eos_token_ids)
    for _ in range(steps):
        ids = [t for t in g.allowed_token_ids(state).tolist() if t not in eos]
        if not ids:
            break
        t = rng.choice(ids)
        walk.append((state, t))
        state = g.advance(state, t)

    def step_all():
        for s, t in walk:
            g.token_bitmask(s)
            g.advance(s, t)

    _, step_s = harness.timed(step_all, 20, budget_s=1.0)
    return {"states": g.num_states, "special_tokens": len(g.special_tokens),
            "compile_ms": harness.median(compile_s) * 1e3, "first_mask_ms": harness.median(first) * 1e3,
            "eager_build_ms": build_s[0] * 1e3, "memory_mb": g.memory_bytes / 2**20,
            "step_us": harness.median(step_s) / max(len(walk), 1) * 1e6, "walk_steps": len(walk)}


def main() -> None:
    ap = harness.arg_parser(__doc__, "fewer repetitions and a shorter walk")
    ap.add_argument("--vocabs", nargs="+", choices=sorted(VOCABS), default=list(VOCABS))
    args = ap.parse_args()
    reps, steps = (2, 20) if args.quick else (5, 200)
    rows = []
    for name in args.vocabs:
        asset, special = VOCABS[name]
        path = assets.fetch(asset)
        vocab = onyx.Vocabulary.from_gguf(path)
        template = ChatTemplate.from_gguf_metadata(onyx.read_gguf_metadata(str(path)))
        for label, (kind, spec) in structures(vocab, template, special).items():
            row = {"vocab": name, "structure": label, **measure(vocab, kind, spec, steps, reps)}
            rows.append(row)
            print(f"{name:8} {label:15} states {row['states']:6}  compile {row['compile_ms']:8.2f} ms  "
                  f"first mask {row['first_mask_ms']:6.2f} ms  eager {row['eager_build_ms']:8.1f} ms  "
                  f"{row['memory_mb']:7.1f} MB  step {row['step_us']:5.2f} µs", flush=True)
    harness.save_results(harness.out_dir(args.out), "structure_bench",
                         {"meta": harness.machine_meta(), "load": harness.loadavg(), "quick": args.quick,
                          "rows": rows})


if __name__ == "__main__":
    main()
