"""The tables of docs/benchmarks.md: one renderer per results file (`r_*`: the file's data →
Markdown lines, in the bench's own terms), and the number formats they share. Used by
bench/report.py."""

from __future__ import annotations

# -- formatting --------------------------------------------------------------------------------

def n(x, d: int = 1) -> str:
    """A number with `d` decimals and thousands separators; '-' for a missing value."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    return f"{x:,.{d}f}"


def ratio(x, d: int = 2) -> str:
    return "-" if x is None else f"{x:.{d}f}×"


def pct(x, d: int = 1) -> str:
    return "-" if x is None else f"{x:.{d}f}%"


def span(values) -> str:
    """The range of some ratios: '0.91-1.40×'."""
    vals = [v for v in values if v is not None]
    lo, hi = (f"{min(vals):.2f}", f"{max(vals):.2f}") if vals else ("-", "-")
    return "-" if not vals else f"{lo}×" if lo == hi else f"{lo}-{hi}×"


def p3(d: dict | None, d_: int = 1) -> str:  # p50 / p99 / max of a summary
    return "-" if not d else " / ".join(n(d.get(k), d_) for k in ("p50", "p99", "max"))


def table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out + [""]


# -- one section per results file --------------------------------------------------------------

def r_grammar(d: dict) -> list[str]:
    peers = ["outlines-core", "xgrammar", "llguidance"]
    rows: dict[tuple, dict] = {}
    for r in d["rows"]:
        rows.setdefault((r["vocab"], r["pattern"]), {})[r["engine"]] = r
    out = ["Onyx's times, and each peer's as µs or ms (× Onyx's). Eager build: Onyx's `compile + "
           "build_all()` against outlines-core's index construction.", ""]

    def peer(r: dict | None, key: str, ratio_key: str, d: int) -> str:
        ok = r and not r.get("error") and r.get(key) is not None
        return f"{n(r[key], d)} ({ratio(r['ratio_vs_onyx'][ratio_key], 0)})" if ok else "-"

    for vocab in dict.fromkeys(v for v, _ in rows):
        size = next(r["vocab_size"] for r in d["rows"] if r["vocab"] == vocab)
        out += [f"**{vocab}** ({n(size, 0)} tokens)", ""]
        body = [[_pattern_cell(pattern, by["onyx"])]
                + [n(by["onyx"][k], 2) for k in ("first_mask_ms", "eager_build_ms", "step_mean_us",
                                                              "step_worst_state_us")]
                + [peer(by.get("outlines-core"), "eager_build_ms", "eager_build", 1)]
                + [peer(by.get(p), "step_mean_us", "step", 2) for p in peers]
                for (v, pattern), by in rows.items() if v == vocab and "onyx" in by]
        out += table(["pattern", "first mask ms", "eager build ms", "step µs", "worst state µs",
                      "outlines-core eager ms"] + [f"{p} step µs" for p in peers], body)
    failed = [f"{t['vocab']}/{t['pattern']} {k}" for t in d.get("targets", [])
              for k, v in t.items() if isinstance(v, dict) and v.get("applies", True) and v.get("pass") is False]
    out += ["Targets (step ≤ 2 µs in every state at 152k tokens, first mask ≤ 5 ms, eager build ≥ 5× "
            "outlines-core's index): " + ("all met." if not failed else "missed: " + ", ".join(failed) + "."), ""]
    if d.get("regular_vs_baseline"):
        rs = d["regular_vs_baseline"]["rows"]
        out += ["Regular patterns against an earlier build (`--baseline`, run just before on the same machine): "
                "Onyx's warm step now / before, median " + span(r["ratio"] for r in rs) + ", p99 "
                + span(r["p99_ratio"] for r in rs) + f" over {len(rs)} (vocabulary, pattern) pairs.", ""]
    if d.get("pushdown"):
        out += _r_pushdown(d["pushdown"])
    return out


def _pattern_cell(pattern: str, r: dict) -> str:
    if r["kind"] == "regex":
        return f"`{r['pattern_text']}`"
    return f"{pattern} ({r['pattern_text']})" if r["kind"] == "gbnf" else f"{pattern} schema"


def _trio(s: dict | None, d: int = 2) -> str:
    return "-" if not s else " / ".join(n(s[k], d) for k in ("median_us", "p99_us", "max_us"))


def _r_pushdown(pd: dict) -> list[str]:
    """The pushdown walks: mask time per engine, cold and warm, and the states where a peer's mask
    differs from Onyx's."""
    o = pd["options"]
    out = [f"**Pushdown walks** ({pd['vocab']}): per pattern the sample's walk and {o['random_walks']} seeded "
           f"random walks of up to {o['walk_len']} tokens made from Onyx's masks, replayed by every engine; the "
           f"mask and the advance timed apart, µs as median / p99 / max; cold = one pass on a freshly compiled "
           f"grammar, warm = up to {o['passes']} passes after it. A peer that takes long walks a prefix of each "
           "walk (states timed says how many).", ""]
    body = []
    for r in pd["rows"]:
        w = pd["walks"].get(r["pattern"], {}).get("walks", [])
        label = f"{r['pattern']} ({sum(x['tokens'] for x in w)} tokens, nesting {max((x['max_nesting'] for x in w), default=0)})"
        if r.get("error"):
            body.append([label, r["engine"], "-", "-", "-", "-", r["error"][:60]])
            continue
        ag = r.get("agreement")
        dis = "-" if not ag else f"{ag['states_differing']}/{ag['states_compared']}" + (
            f" ({ag['relation']})" if ag["states_differing"] else "")
        if r.get("rejected"):
            dis += f"; rejects {len(r['rejected'])} walk(s)"
        body.append([label, r["engine"], n(r["steps"], 0), _trio(r["cold"]["mask"]), _trio(r["warm"]["mask"]),
                     _trio(r["warm"]["advance"]), dis])
    out += table(["pattern", "engine", "states timed", "cold mask µs", "warm mask µs", "warm advance µs",
                  "masks ≠ Onyx's"], body)
    bad = [f"{t['pattern']} " + "/".join(ph for ph in ("cold", "warm") if not t[f"{ph}_mask"]["pass"])
           for t in pd["targets"] if "error" not in t and not (t["cold_mask"]["pass"] and t["warm_mask"]["pass"])]
    out += ["Targets (Onyx's mask along the walks at 152k tokens: median ≤ 2 µs, p99 ≤ 50 µs): "
            + ("all met." if not bad else "missed: " + ", ".join(bad) + "."), ""]
    return out


STRUCTURES = {"free_text": "`(?s:.)*`, the all-tokens baseline",
              "until_text": "free text until a trigger written as text, then a schema",
              "until_token": "the same trigger as a special token (marker byte)",
              "reasoning_json": "`<think>`…`</think>`, then a schema",
              "tools_required": "22 tools, `required`", "tools_auto": "22 tools, `auto`"}


def r_structure(d: dict) -> list[str]:
    out = []
    for vocab in dict.fromkeys(r["vocab"] for r in d["rows"]):
        out += [f"**{vocab}**", ""]
        out += table(["structure", "states", "compile ms", "first mask ms", "eager build ms", "memory MB",
                      "step µs"],
                     [[STRUCTURES.get(r["structure"], r["structure"]), n(r["states"], 0), n(r["compile_ms"], 2),
                       n(r["first_mask_ms"], 2), n(r["eager_build_ms"], 1), n(r["memory_mb"], 1), n(r["step_us"], 2)]
                      for r in d["rows"] if r["vocab"] == vocab])
    return out


def refusals(errors: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in errors.items()) or "none"


def r_schema(d: dict) -> list[str]:
    cov = d["coverage"]
    onyx = cov["onyx"]
    walked = "outputs" in onyx["all"]
    peers = [e for e in cov if e != "onyx"]
    header = ["set", "schemas", "Onyx compiled", "restricted", "exact"]
    header += ["covered", "walks judged", "invalid"] if walked else []
    header += [f"{p} compiled" for p in peers] + ["Onyx compile ms p50 / p99 / max"]
    header += [f"{p} compile ms p50 / p99 / max" for p in peers]
    body = []
    for name, s in list(onyx["sets"].items()) + [("**all**", onyx["all"])]:
        exact = 100 * (s["compiled"] - s.get("restricted", 0)) / s["schemas"] if s["schemas"] else None
        cells = [name, n(s["schemas"], 0), pct(s["compiled_pct"]), n(s.get("restricted"), 0), pct(exact)]
        if walked:
            o = s.get("outputs", {})
            judged = o.get("valid", 0) + o.get("invalid", 0)
            cells += [pct(s.get("covered_pct")), n(judged, 0), n(o.get("invalid"), 0)]
        other = [cov[p]["all"] if name == "**all**" else cov[p]["sets"].get(name, {}) for p in peers]
        cells += [pct(o.get("compiled_pct")) for o in other] + [p3(s.get("compile_ms"))]
        cells += [p3(o.get("compile_ms")) for o in other]
        body.append(cells)
    out = table(header, body)
    a = onyx["all"]
    out += [f"Onyx's refusals ({a['schemas'] - a['compiled']}): {refusals(a['errors'])}.", ""]
    if walked:
        o = a["outputs"]
        out += [f"Walks: {n(o['walks'], 0)}, of them {n(o['valid'], 0)} valid, {n(o['invalid'], 0)} invalid, "
                f"{n(o['walk_errors'], 0)} that could not run (below), {n(o.get('invalid_other_drafts'), 0)} "
                "valid under the judging draft but invalid under another the schema fits.", ""]
        errs: dict[str, int] = {}
        for e in onyx.get("walk_errors", []):
            key = e["error"].split(":")[0] + (": token index over its limit" if "size limit" in e["error"] else "")
            errs[key] = errs.get(key, 0) + 1
        if errs:
            out += [f"Schemas whose walks could not run ({sum(errs.values())}): " + refusals(errs) + ".", ""]
        out += [f"DFA states p50 / p99 / max: {p3(a.get('states'), 0)}.", ""]
    if d.get("suite"):
        out += suite_lines(d["suite"])
    return out


def suite_lines(s: dict) -> list[str]:
    t = s["total"]
    out = [f"JSON Schema Test Suite, draft 2020-12 with `optional/`: {n(t['tests'], 0)} tests, "
           f"**{n(t['passed'], 0)} passed, {n(t['false_positives'], 0)} false positives**, "
           f"{n(t['false_negatives'], 0)} false negatives (valid instances outside the generated subset), "
           f"{n(t['refused'], 0)} tests of refused schemas: {refusals(s['refused_by_error'])}.", ""]
    worst = sorted(((f["false_negatives"], k) for k, f in s["files"].items() if f["false_negatives"]), reverse=True)
    if worst:
        out += ["Most false negatives: " + ", ".join(f"{name} {k}" for k, name in worst[:8]) + ".", ""]
    return out


REPAIR_METHODS = {"onyx (default)": "Onyx one stage (`g.repair(text)`, the intent cost model)",
                  "json_repair salvage -> onyx": "**default for a schema**: json_repair `salvage` → Onyx",
                  "json_repair -> onyx": "json_repair → Onyx (`repair_json`)"}


def r_repair(d: dict) -> list[str]:
    out = []
    for part in ("test", "train"):
        s = d["compare"][part]["summary"]
        out += [f"**{part} corpus** ({s[0]['cases']} cases)", ""]
        out += table(["method", "valid JSON", "schema-valid", "intended", "raised", "median ms"],
                     [[REPAIR_METHODS.get(r["method"], r["method"]), pct(r["valid_json_pct"]),
                       pct(r["schema_valid_pct"]), pct(r["intended_pct"]), n(r["raised"], 0),
                       n(1000 * r["time_median_s"], 2)] for r in s])
    lengths = d.get("length_summary", [])
    sizes = sorted({r["target_bytes"] for r in lengths})
    if lengths:
        out += ["Time against length (records schema, median ms; default costs):", ""]
        out += table(["errors"] + [f"{b:,} B" for b in sizes],
                     [[e] + [next((n(1000 * r["time_median_s"], 2) for r in lengths
                                   if r["errors"] == e and r["target_bytes"] == b), "-") for b in sizes]
                      for e in dict.fromkeys(r["errors"] for r in lengths)])
    if d.get("grammar_size"):
        out += ["Time against grammar size (~1 KB inputs, 3 errors):", ""]
        out += table(["grammar", "DFA states", "median ms", "max ms"],
                     [[r["grammar"], n(r["num_states"], 0), n(1000 * r["time_median_s"], 2),
                       n(1000 * r["time_max_s"], 2)] for r in d["grammar_size"]])
    if d.get("anytime"):
        out += ["Anytime answers (cost found by the deadline, proven lower bound, optimum):", ""]
        out += table(["input", "deadline ms", "status", "cost", "lower bound", "optimum", "took ms"],
                     [[r["input"], r["deadline_ms"], r["status"], n(r["cost"], 0), n(r["lower_bound"], 0),
                       n(r["optimum"], 0), n(r["elapsed_ms"], 1)] for r in d["anytime"]])
    return out


def r_runtime(d: dict) -> list[str]:
    rows = [[(c or "").strip() for c in row] for row in d["table"]]
    return table(["measure", "result", "target", "met"],
                 [[f"**{r[0]}**" if r[0][:1].isdigit() and not any(r[1:]) else r[0]] + r[1:] for r in rows])


def r_cache(d: dict) -> list[str]:
    out = []
    for run in d["runs"]:
        out += [f"**{run['model']}**", ""]
        out += table(["prompt tokens", "steps", "paged tok/s", "mlx-lm tok/s", "paired step time paged / mlx-lm",
                      "same tokens"],
                     [[r["prompt_len"], r["steps"], n(r["paged_tok_per_s"]), n(r["mlx_lm_tok_per_s"]),
                       n(r["median_paired_step_time_ratio"], 3), n(r["same_tokens"])] for r in run["decode"]])
        out += table(["length", "rollback 1 µs", "8 µs", "24 µs", "mlx-lm trim 1 / 8 / 24 µs"],
                     [[r["length"], r["rollback_1_us"], r["rollback_8_us"], r["rollback_24_us"],
                       f"{r['mlx_trim_1_us']} / {r['mlx_trim_8_us']} / {r['mlx_trim_24_us']}"]
                      for r in run["rollback"]])
        p = run["prefix_reuse"]
        out += [f"Prefix reuse: {p['system_len']} cached + {p['question_len']} new tokens in "
                f"{n(p['prefix_reuse_ms'])} ms against {n(p['full_prefill_ms'])} ms for the whole prompt "
                f"({ratio(p['speedup'], 1)}), logits within {p['max_abs_logit_diff']:.1e}.", ""]
    return out


SPEC_COLUMNS = ["blind g=4", "aware g=4", "aware+jf g=2", "aware+jf g=4", "aware+jf g=6", "aware+jf g=auto"]


def r_spec(d: dict) -> list[str]:
    out = []
    labels = {p["key"]: f"`{p['label']}`" if p.get("kind") == "regex" else p["label"] for p in d["patterns"]}
    for block in dict.fromkeys(r["block"] for r in d["rows"]):
        rows = {(r["pattern"], r["row"]): r for r in d["rows"] if r["block"] == block}
        out += [f"**{block}**: {d['meta']['blocks'].get(block, '')}", ""]
        body = []
        for key, label in labels.items():
            base = rows.get((key, "baseline"))
            jf4 = rows.get((key, "aware+jf g=4"))
            auto = rows.get((key, "aware+jf g=auto"))
            body.append([label, n(base and base["tok_s"])]
                        + [ratio(rows[(key, c)]["speedup"]) if (key, c) in rows else "-" for c in SPEC_COLUMNS]
                        + [n(jf4 and jf4["forwards_per_token"], 2), n(auto and auto["forwards_per_token"], 2)])
        out += table(["pattern", "baseline tok/s", "blind γ=4", "aware γ=4", "aware+jf γ=2", "γ=4", "γ=6", "auto",
                      "forwards per token, jf γ=4", "auto"], body)
        out += table(["acceptance at γ=2", *labels.values()],
                     [[mode] + [n(rows[(k, f"{mode} g=2")]["acceptance_rate"], 2) if (k, f"{mode} g=2") in rows
                                else "-" for k in labels] for mode in ("blind", "aware", "aware+jf")])
    differing = [f"{r['block']}/{r['pattern']}/{r['row']}" for r in d["rows"] if not r.get("same_as_baseline", True)]
    out += ["Every row gave baseline's greedy tokens." if not differing else
            "Rows whose tokens differ from baseline's: " + ", ".join(differing) + ".", ""]
    fs = d.get("forced_spans", {})
    if fs:
        out += ["Forced spans (jump-forward), once the loop has learnt the model's spelling: " + "; ".join(
            f"{k} {v['forced_tokens']} of {v['tokens']} tokens in {v['forced_spans']} spans (bound "
            f"{ratio(v['forward_bound_speedup'])} from forced spans alone)" for k, v in fs.items()) + ".", ""]
    return out + targets(d.get("targets", {}))


def targets(t: dict) -> list[str]:
    lines = []
    for name, v in t.items():
        if isinstance(v, dict) and all(isinstance(x, dict) and "pass" in x for x in v.values()):
            bad = [k for k, x in v.items() if not x["pass"]]
            lines.append(f"- `{name}`: " + ("met on every pattern" if not bad else "not met on " + ", ".join(bad)))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            lines.append(f"- `{name}`: {ratio(v)}")
        elif isinstance(v, dict) and "holds" in v:
            lines.append(f"- `{name}`: {'holds' if v['holds'] else 'does not hold'}")
    return (["Targets, as the bench reports them:", ""] + lines + [""]) if lines else []


SERVERS = {"onyx": "Onyx", "onyx-base": "Onyx, base revision", "mlx-lm": "mlx-lm server"}


def r_serve(d: dict) -> list[str]:
    rank = {s: i for i, s in enumerate(SERVERS)}
    runs = sorted(d["runs"], key=lambda r: (r["clients"], rank.get(r["server"], len(rank)), r["load"]))
    out = table(["server, load", "clients", "aggregate tok/s", "TTFT ms p50 / p99", "ITL ms p50 / p99"],
                [[f"{SERVERS.get(r['server'], r['server'])}, {r['load']}", r["clients"], n(r["agg_tok_s"]),
                  f"{n(r['ttft_ms_p50'], 0)} / {n(r['ttft_ms_p99'], 0)}",
                  f"{n(r['itl_ms_p50'])} / {n(r['itl_ms_p99'], 0)}"]
                 for r in runs])
    base = d.get("meta", {}).get("base_revision")
    return out + ([f"Base revision: `{base}`.", ""] if base else []) + targets(d.get("targets", {}))


def r_matmul(d: dict) -> list[str]:
    rows = d["rows"]
    ks = sorted({r["k"] for r in rows})
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    by = {(r["shape"], r["k"]): r for r in rows}
    out = ["Weight GB/s, one thread / split between two threads; then the medians of the paired per-call ratios "
           "(> 1: the first is faster).", ""]
    ratios = [("split / one thread", "split_over_now_wall"), ("one thread / before", "now_over_before"),
              ("one thread / OpenBLAS", "now_over_openblas")]
    dims = {r["shape"]: f"{r['N']}×{r['K']}" for r in rows}
    out += table(["shape (N×K)"] + [f"k={k}" for k in ks] + [lbl for lbl, _ in ratios],
                 [[f"{s} {dims[s]}" if s != dims[s].replace("×", "x") else dims[s]]
                  + [f"{n(by[(s, k)]['now_gbs'])} / {n(by[(s, k)].get('split_gbs'))}" if (s, k) in by else "-"
                     for k in ks]
                  + [span([by[(s, k)].get(key) for k in ks if (s, k) in by]) for _, key in ratios] for s in shapes])
    before = d["meta"].get("variants", {}).get("before")
    return out + ([f"`before`: {before}.", ""] if before else [])


def r_overlap(d: dict) -> list[str]:
    return table(["model", "sequences × rows", "overlapped ms", "evaluated at the end ms", "ratio"],
                 [[model, case.replace("x", " × "), n(v["overlapped_ms"]), n(v["at_the_end_ms"]), ratio(v["ratio"])]
                  for model, cases in d["overlap"].items() for case, v in cases.items()])


def r_integrations(d: dict) -> list[str]:
    engines = ("onyx", "llguidance")
    out = table(["grammar", "Onyx tok/s, paired ratio to none", "llguidance, same",
                 "same tokens as none (Onyx / llguidance)", "Onyx µs per token", "llguidance µs per token"],
                [[v["label"]] + [ratio(v["modes"][e]["median_paired_ratio"], 3) for e in engines]
                 + [" / ".join(n(v["same_tokens_as_unconstrained"][e]) for e in engines)]
                 + [n(d["processor_us"][k][e]["median_us"], 0) for e in engines] for k, v in d["decode"].items()])
    c = d["construction"]
    out += [f"Making a processor: the first for a tokenizer {n(c['onyx_first_s'], 2)} s (vocabulary, self-test, "
            f"compile), another for the same pattern {n(1000 * c['onyx_cached_s'], 2)} ms; llguidance's tokenizer "
            f"{n(c['llguidance_tokenizer_s'], 2)} s, its matcher {n(1000 * c['llguidance_matcher_s'], 2)} ms. "
            f"llguidance's bitmask here: {d['meta'].get('llguidance_bitmask', '-')}.", ""]
    return out + targets(d.get("targets", {}))


def r_phi(d: dict) -> list[str]:
    dy = {(r["grammar"], r["estimator"]): r for r in d["dyck"]["rows"]}
    kinds = ("uniform", "onestep", "exact")
    out = ["Bounded Dyck, toy LM: analytic TV to μ\\* of each estimator's law; exact Φ also sampled by the verifier.",
           ""]
    out += table(["grammar", "Uniform", "OneStep", "exact Φ", "exact Φ sampled", "floor",
                  "verifier acceptance U / O / E"],
                 [[g] + [n(dy[(g, e)]["tv_analytic"], 3) for e in kinds]
                  + [n(dy[(g, "exact")]["tv_empirical"], 3), n(dy[(g, "exact")]["floor_mu_star"], 3),
                     " / ".join(n(dy[(g, e)]["acceptance"], 2) for e in kinds)]
                  for g in dict.fromkeys(g for g, _ in dy)])
    seeds = d["dyck"].get("seeds", {})
    if seeds:
        out += ["Over toy-LM seeds, OneStep beats Uniform: " + ", ".join(
            f"{g} {s['onestep']['onestep_beats_uniform']} of {s['n_seeds']}" for g, s in seeds.items()) + ".", ""]
    out += ["Finite JSON on the default model, temperature 1:", ""]
    out += table(["schema", "trie", "TV(μ^proj, μ\\*)", "exact Φ", "OneStep", "FVO loop", "floor", "loop acceptance",
                  "chat tok/s none / onestep / exact", "exact Φ prepare s"],
                 [[r["schema"], f"{r['trie']}, {r['trie_nodes']} nodes", n(r["tv_proj"], 3), n(r["tv_exact_phi"], 3),
                   n(r["tv_onestep"], 3), n(r["fvo_tv"], 4), n(r["fvo_floor"], 3), n(r["fvo_acceptance"], 2),
                   " / ".join(n(r[f"chat_{k}"]["tokens_per_s"]) for k in ("none", "onestep", "exact")),
                   n(r["prepare_s"], 2)] for r in d["json"]])
    return out


def r_whitespace(d: dict) -> list[str]:
    meta = d["meta"]
    out = [f"{len(meta['tasks'])} chat prompts with a schema, greedy, at most {meta['max_tokens']} tokens. *Log-prob*: "
           "the mean, per output token, of its log-probability under the unconstrained model; *Δ ws=0*: its "
           "task-by-task difference from compact output, and on how many tasks the setting is ahead / behind; "
           "*total*: the whole output's log-probability. *Changed*: positions where the unconstrained argmax is not "
           "the token written. *Loops*: outputs that used the whole budget with at least half of their last 32 "
           "tokens whitespace.", ""]
    body = []
    for name, s in d["summary"].items():
        vs = s.get("vs_compact")
        body.append([f"`{name}`" if name != "free" else "unconstrained", pct(100 * s["valid"], 0),
                     n(s["mean_logprob"], 3), f"{vs['mean_logprob_diff']:+.3f} ({vs['ahead']} / {vs['behind']})"
                     if vs else "-", n(s["sum_logprob"]), n(s["tokens"]), ratio(vs["tokens_ratio"]) if vs else "-",
                     n(s["forwards"]), pct(100 * s["argmax_changed"]), pct(100 * s["whitespace_share"]),
                     n(s["longest_whitespace_run"], 0), n(s["used_budget"], 0), n(s["whitespace_loops"], 0)])
    out += table(["setting", "valid", "log-prob", "Δ ws=0 (ahead / behind)", "total log-prob", "tokens",
                  "tokens × ws=0", "forwards", "changed", "whitespace tokens", "longest whitespace run",
                  "used the budget", "loops"], body)
    out += ["The tasks' grammars, summed: " + "; ".join(
        f"`{k}` {n(g['states'], 0)} states, compiled in {n(1000 * g['compile_s'], 0)} ms"
        for k, g in d["grammars"].items()) + ".", ""]
    sample = d.get("schema_sample")
    if sample:
        out += [f"The first {sample['per_set']} schemas of each JSONSchemaBench set, compiled by the grammar core:", ""]
        out += table(["setting", "compiled", "restricted", "states", "compile time"],
                     [[f"`{k}`", f"{c['compiled']} of {c['schemas']}", n(c["restricted"], 0), n(c["states"], 0),
                       f"{n(c['compile_s'])} s"] for k, c in sample["settings"].items()])
    r = d["recommended"]
    out += [f"Recommended default: **`max_whitespace={r['max_whitespace']}`**, {r['rule']} (eligible: "
            f"{', '.join(f'`{e}`' for e in r['eligible']) or 'none'}).", ""]
    first = meta["tasks"][0]
    examples = [[f"`{name}`" if name != "free" else "unconstrained",
                 "`" + next(o["text"] for o in outs if o["task"] == first).replace("\n", "\\n")[:120] + "`"]
                for name, outs in d["outputs"].items()]
    out += [f"Greedy outputs for `{first}` (newlines as `\\n`, cut at 120 characters):", ""]
    return out + table(["setting", "output"], examples)


def r_memory(d: dict) -> list[str]:
    out = []
    by = {"text": "the size of their JSON text", "index": "the size of the token index a schema bench recorded"}
    for ranking, engine, res in ((r, e, x) for r, engines in d["results"].items() for e, x in engines.items()):
        s = res["summary"]
        peak = s["peak_mb"] or {}
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["status"].items()))
        out += [f"**{engine}**, the {s['schemas']} largest schemas by {by.get(ranking, ranking)} ({statuses}): "
                f"peak resident memory p50 {n(peak.get('p50'), 0)} MB, "
                f"max {n(peak.get('max'), 0)} MB; {s['invalid']} invalid walks.", ""]
        rows = [[r["set"], f"`{r['file']}`", n(r["bytes"] / 1e3, 0), n(r.get("setup_mb"), 0), n(r.get("compile_mb"), 0),
                 n(r.get("walk_mb"), 0), n(r["index_bytes"] / 1e6, 0) if r.get("index_bytes") else "-", r["status"]]
                for r in sorted(res["schemas"], key=lambda r: -(r.get("walk_mb") or r.get("compile_mb") or 0))[:15]]
        before = d.get("before", {}).get("results", {}).get(ranking, {}).get(engine)
        if before:
            b, was = before["summary"], d["before"]["meta"]
            bpeak = b["peak_mb"] or {}
            how = "the whole index built first" if was.get("eager", True) else "only the rows visited"
            out += [f"Before ({was.get('commit')}, {how}): peak p50 {n(bpeak.get('p50'), 0)} MB, "
                    f"max {n(bpeak.get('max'), 0)} MB; "
                    + ", ".join(f"{k} {v}" for k, v in sorted(b["status"].items())) + ".", ""]
        out += ["The 15 largest peaks:", ""]
        out += table(["set", "file", "JSON KB", "setup MB", "compiled MB", "walked MB", "index MB", "status"], rows)
    return out


def r_cobatch(d: dict) -> list[str]:
    runs = [("", d)] + ([(f" at {d['before']['commit']}", d["before"])] if "before" in d else [])
    rows = [[name + at, n(x["itl_p50_ms"]), n(x["itl_p99_ms"]), n(x["max_gap_ms"]), n(x["health_p99_ms"]),
             n(x["window_s"], 2), x["gaps"], n(r["itl_p99_ratio"], 2)]
            for at, r in runs for name, x in (("quiet", r["quiet"]), ("disturbed", r["disturbed"]))]
    out = table(["rounds", "ITL p50 ms", "ITL p99 ms", "max gap ms", "/health p99 ms", "window s", "gaps",
                 "p99 disturbed / quiet"], rows)
    heavy = ", ".join(n(h["s"], 1) for h in d["heavy"])
    noise = ""
    if "pair_ratios" in d:
        lo, hi = d["ratio_interval_90"]
        noise = (f" Per pair of rounds (a quiet one and the disturbed one after it): "
                 f"{', '.join(n(x, 2) for x in d['pair_ratios'])} (median {n(d['pair_ratio_median'], 2)}); "
                 f"90% interval of the ratio from resampling the pairs: {n(lo, 2)}-{n(hi, 2)}.")
    out += [f"ITL p99 disturbed / quiet: **{n(d['itl_p99_ratio'], 2)}** (the issue's gate: at most 1.25).{noise} "
            f"The heavy requests took (s, schema / regex / prompt per round): {heavy}."]
    if "before" in d and d["before"].get("heavy"):
        before = ", ".join(n(h["s"], 1) for h in d["before"]["heavy"])
        out += ["", f"At {d['before']['commit']}: {before}."]
    return out


def r_long_context(d: dict) -> list[str]:
    servers = [k[:-len("_ttft_s")] for k in d["summary"][0] if k.endswith("_ttft_s")]
    rows = [[r["prompt_tokens"]] + [n(r[f"{s}_ttft_s"], 2) for s in servers] + [n(r[f"{s}_itl_ms"]) for s in servers]
            + [ratio(r[f"ttft_{s}_over_onyx"]) for s in servers if s != "onyx"] for r in d["summary"]]
    return table(["prompt tokens"] + [f"{s} TTFT s" for s in servers] + [f"{s} ms/token" for s in servers]
                 + [f"TTFT {s} / onyx" for s in servers if s != "onyx"], rows)


# -- the mapping: one entry per results file ---------------------------------------------------


def r_host(d: dict) -> list[str]:
    m = d["meta"]
    out = [f"{m['rounds']} rounds of {m['max_tokens']} tokens; `rows`: the mean sequences per counted step "
           "(the batch admits prompts a few at a time, so eight requests decode together only part of the time).", ""]
    rows = [[r["sequences"], r["load"], r["steps"], n(r["mean_rows"], 2), n(r["engine_step_ms"], 2),
             n(r["bare_step_ms"], 2), n(r["engine_minus_bare_ms"], 2), n(r["outside_forward_ms"], 2),
             pct(100 * r["outside_share"])] for r in d["results"]]
    return out + table(["requests", "load", "steps", "rows", "engine step ms", "bare step ms", "engine − bare ms",
                        "outside the forward ms", "share"], rows)


def r_quant(d: dict) -> list[str]:
    out = [f"Bandwidth: {n(d['float_stream_gbs'])} GB/s (the one-row float kernel on {d['shim_threads']} threads); "
           f"the quantized kernel streams {n(d['quant_stream_gbs'])} GB/s of packed bytes. Decode speed-up "
           f"(paired, float32 / quantized): {ratio(d['decode_speedup'])}; the same greedy tokens over 64: "
           f"{'yes' if d['same_greedy_64'] else 'no'}.", ""]
    rows = [[k, r["dtype"], n(r["bytes_per_token"] / 1e6), n(r["floor_ms"], 2), n(r["decode_ms"], 2),
             n(r["floor_fraction"], 2)] for k, r in d["loads"].items()]
    out += table(["load", "dtype", "MB read per token", "floor ms", "decode ms/token", "floor / decode"], rows)
    rows = [[p["shape"], p["rows"], n(p["float32_us"], 0), n(p["quantized_us"], 0), ratio(p["speedup"])]
            for p in d["products"]]
    return out + [""] + table(["shape", "rows", "float32 µs", "quantized µs", "speed-up"], rows)


def r_peer_serve(d: dict) -> list[str]:
    rows = [[r["load"], r["clients"], r["server"], r["requests"], n(r["tokens"] / max(r["requests"], 1), 0),
             n(r["agg_tok_s"]), n(r["requests"] / r["wall_s"], 2), n(r["ttft_ms_p50"]), n(r["itl_ms_p50"]),
             n(r["itl_ms_p99"]), r["invalid"], r["cut_off"]]
            for r in sorted(d["runs"], key=lambda r: (r["load"], r["clients"], r["server"]))]
    goals = [[k, ratio(v["onyx_over_llama_cpp"]), ratio(v["goal"], 1), "yes" if v["met"] else "no"]
             for k, v in d["targets"].items() if isinstance(v, dict)]
    invalid = ", ".join(f"{k.removeprefix('invalid_')} {v}" for k, v in d["targets"].items() if k.startswith("invalid_"))
    return (table(["load", "clients", "server", "requests", "tokens per answer", "tok/s", "answers/s", "TTFT p50 ms",
                   "ITL p50 ms", "ITL p99 ms", "invalid", "cut off"], rows)
            + [f"Invalid constrained answers: {invalid}.", ""]
            + table(["load, clients", "Onyx / llama.cpp", "goal", "met"], goals))


def r_vllm(d: dict) -> list[str]:
    rows = []
    for name, r in d["results"].items():
        c, m = r["compile_ms"] or {}, r["mask_fill_us"] or {}
        runs = {x["batch"]: x for x in r["runs"]}
        rows.append([name, f"{r['accepted']} / {r['schemas']}", n(c.get("p50")), n(c.get("p90")), n(c.get("max"), 0),
                     n(m.get("p50"), 0), n(m.get("p99"), 0), n(runs[1]["tokens_per_s"]), n(runs[8]["tokens_per_s"]),
                     n(runs[1].get("decode_ms_per_token")), n(runs[8].get("decode_ms_per_token")),
                     n(runs[8]["tokens_per_request"], 0), sum(x["invalid"] for x in r["runs"]),
                     sum(x["cut"] for x in r["runs"])])
    out = table(["backend", "schemas accepted", "compile p50 ms", "p90", "max", "mask fill p50 µs", "p99",
                 "tok/s, 1 at a time", "tok/s, 8", "ms/token, 1", "ms/token, 8", "tokens a request", "invalid",
                 "cut"], rows)
    if d.get("ratios"):
        what = {"tokens_per_s": "tokens/s", "decode_speed": "speed per token after the first"}
        out += ["Onyx / xgrammar, pass by pass (the table gives each backend's median pass): "
                + "; ".join(f"{what[k.removeprefix('onyx_over_xgrammar_').rsplit('_batch', 1)[0]]} at "
                            f"{k.rsplit('batch', 1)[1]} at a time " + ", ".join(ratio(v) for v in vs)
                            for k, vs in d["ratios"].items()) + "."]
    return out
