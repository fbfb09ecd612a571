"""The pushdown section of bench/grammar_bench.py: walks through recursive JSON Schemas and
llama.cpp's GBNF grammars, replayed by Onyx, llguidance and xgrammar, with each state's mask and
advance timed apart (cold and warm) and the states where a peer's mask differs from Onyx's.
Shared formatting helpers of the bench live here too."""

from __future__ import annotations

import math
import statistics
import sys
import time

import numpy as np

from bench import harness, peers


def pattern_label(kind: str, spec) -> str:
    return {"regex": spec, "gbnf": f"GBNF {spec}"}.get(kind, "JSON schema")


def _ids(words: np.ndarray, limit: int = 4) -> list[int]:
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))[:limit].tolist()


def fmt(x, unit="", digits=None):
    if x is None:
        return "n/a"
    if isinstance(x, (int, float)) and math.isfinite(x):
        if digits is None:
            digits = 2 if abs(x) < 10 else (1 if abs(x) < 1000 else 0)
        return f"{x:,.{digits}f}{unit}"
    return str(x)


PD_ENGINES = ("onyx", "llguidance", "xgrammar")  # outlines-core has no recursion (nor GBNF)
TARGET_PD_MEDIAN_US = 2.0
TARGET_PD_P99_US = 50.0
_PUNCT = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~ \t\n")


def _structural(tokens: list[bytes]) -> np.ndarray:
    """Per token id: its bytes are all ASCII punctuation or whitespace (brackets, quotes,
    separators, operators), the tokens that open and close nesting."""
    return np.array([bool(b) and all(c in _PUNCT for c in b) for b in tokens], dtype=bool)


def make_walks(vd, g, sample_tokens: list[int], n_random: int, length: int, seed: int) -> list[dict]:
    """The sample's walk, then `n_random` seeded random walks of up to `length` tokens through
    Onyx's masks. Each step draws a token uniformly from the allowed ones or, half the time, from
    the allowed punctuation-only ones, so a walk opens and closes nesting instead of staying
    inside one string or name. A walk ends early where only EOS is allowed."""
    rng = np.random.default_rng(seed)
    struct = _structural(vd.tokens)
    eos = np.array(vd.eos, dtype=np.int64)
    walks = [{"name": "sample", "tokens": list(sample_tokens)}]
    for w in range(n_random):
        s, toks = g.initial_state, []
        for _ in range(length):
            ids = g.allowed_token_ids(s)
            ids = ids[~np.isin(ids, eos)]
            if not len(ids):
                break
            cand = ids[struct[ids]] if rng.random() < 0.5 else ids
            if not len(cand):
                cand = ids
            tok = int(cand[rng.integers(len(cand))])
            toks.append(tok)
            s = g.advance(s, tok)
        walks.append({"name": f"random{w}", "tokens": toks})
    return walks


def nesting_depth(text: bytes) -> int:
    """Deepest bracket nesting ({, [, ( against }, ], )) outside double-quoted strings: how far
    a walk went into the recursion."""
    depth = best = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:
                esc = True
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in b"{[(":
            depth += 1
            best = max(best, depth)
        elif c in b"}])":
            depth -= 1
    return best


def reference_masks(vd, g, walks: list[dict]) -> tuple[list[bytes], list[list[int]]]:
    """Onyx's mask (EOS bits aside) in every state along every walk, kept once each: (the
    distinct masks, per walk the index of each state's mask)."""
    uniq: dict[bytes, int] = {}
    index = []
    for w in walks:
        s, idx = g.initial_state, []
        toks = w["tokens"]
        for i in range(len(toks) + 1):
            raw = vd.mask_signature(g.token_bitmask(s))[3]
            idx.append(uniq.setdefault(raw, len(uniq)))
            if i < len(toks):
                s = g.advance(s, toks[i])
        index.append(idx)
    return list(uniq), index


def _split_stats(passes: list[list[tuple]]) -> dict:
    """Over every pass of every walk: median, p99, max and mean (µs) of the mask calls, of the
    advance calls, and of both together (a step that advanced)."""
    m = [x for p in passes for w in p for x in w[0]]
    a = [x for p in passes for w in p for x in w[1]]
    st = [x + y for p in passes for w in p for x, y in zip(w[0], w[1])]

    def one(xs):
        if not xs:
            return None
        v = np.array(xs, dtype=np.float64) / 1e3
        return {"median_us": float(np.median(v)), "p99_us": float(np.percentile(v, 99)),
                "max_us": float(v.max()), "mean_us": float(v.mean()), "n": int(v.size)}

    return {"mask": one(m), "advance": one(a), "step": one(st)}


def _slowest(passes: list[list[tuple]], walks: list[list[int]], tokens: list[bytes], k: int = 5) -> list[dict]:
    """The k states with the slowest mask (per state: the median over the passes), with the
    token that led there and the advance time out of it."""
    per: dict[tuple[int, int], list[tuple[int, int | None]]] = {}
    for p in passes:
        for wi, (m_ns, a_ns, _) in enumerate(p):
            for i, x in enumerate(m_ns):
                per.setdefault((wi, i), []).append((x, a_ns[i] if i < len(a_ns) else None))
    ranked = sorted(per.items(), key=lambda kv: -statistics.median(x for x, _ in kv[1]))[:k]
    out = []
    for (wi, i), xs in ranked:
        adv = [a for _, a in xs if a is not None]
        prev = walks[wi][i - 1] if i > 0 else None
        out.append({"walk": wi, "step": i, "mask_us": statistics.median(x for x, _ in xs) / 1e3,
                    "advance_us": statistics.median(adv) / 1e3 if adv else None,
                    "after_token": None if prev is None else tokens[prev].decode("utf-8", "replace")})
    return out


def _agreement(eng: peers.Adapter, compiled, walks: list[list[int]], ref: list[bytes],
               ref_idx: list[list[int]], deadline_ns: int) -> dict:
    """The engine's mask along every walk against Onyx's (EOS bits aside, untimed): the states
    where they differ, whether the engine's allows a subset or a superset of Onyx's, and a few
    examples. Stops at `deadline_ns` (states_compared says how far it got)."""
    vd = eng.vd
    compared = differing = 0
    kinds: set[str] = set()
    examples = []
    for wi, toks in enumerate(walks):
        m = eng.matcher(compiled)
        for i in range(len(toks) + 1):
            raw = vd.mask_signature(m.mask())[3]
            onyx_raw = ref[ref_idx[wi][i]]
            compared += 1
            if raw != onyx_raw:
                differing += 1
                pa, po = np.frombuffer(raw, dtype=np.uint32), np.frombuffer(onyx_raw, dtype=np.uint32)
                extra, missing = _ids(pa & ~po), _ids(po & ~pa)
                kinds.add("subset" if not extra else "superset" if not missing else "different")
                if len(examples) < 6:
                    examples.append({
                        "walk": wi, "step": i,
                        "text_before": b"".join(vd.tokens[t] for t in toks[:i])[-40:].decode("utf-8", "replace"),
                        "only_peer": [vd.tokens[t].decode("utf-8", "replace") for t in extra],
                        "only_onyx": [vd.tokens[t].decode("utf-8", "replace") for t in missing]})
            if i == len(toks) or time.perf_counter_ns() > deadline_ns:
                break
            m.advance(toks[i])
        if time.perf_counter_ns() > deadline_ns:
            break
    return {"states_compared": compared, "states_differing": differing,
            "relation": "/".join(sorted(kinds)) or "equal", "examples": examples}


def run_pushdown(eng: peers.Adapter, task: dict) -> dict:
    """Inside the engine's worker: compile, one cold pass over every walk on the fresh grammar
    (each state's first visit, unless an earlier step already met it), the masks compared with
    Onyx's, then up to `passes` warm passes. The row's time budget is shared out (cold pass 40%,
    comparison to 70%, warm passes to 100%, at least one warm pass): a peer whose masks take
    long walks a prefix of each walk, the same prefix in every pass."""
    kind, spec, walks, passes = task["kind"], task["spec"], task["walks"], task["passes"]
    pc = time.perf_counter_ns
    start = pc()
    budget_ns = int(task["budget_s"] * 1e9)
    compiled = eng.compile(kind, spec)
    row: dict = {"compile_ms": (pc() - start) / 1e6}
    t0 = pc()
    # Onyx walks every walk whole: its cold masks are what the targets judge (and the walks were
    # made from its masks, so they end in reasonable time)
    cold_deadline = peers.NO_DEADLINE if eng.name == "onyx" else t0 + int(0.4 * budget_ns)
    cold = [eng.split_walk(compiled, w, cold_deadline) for w in walks]
    # the prefix of each walk this engine took: up to a rejected token or the time budget
    reach = [len(r[1]) for r in cold]
    walks = [w[:n] for w, n in zip(walks, reach)]
    if eng.name != "onyx":
        ref_idx = [ix[:n + 1] for ix, n in zip(task["ref_idx"], reach)]
        row["agreement"] = _agreement(eng, compiled, walks, task["ref"], ref_idx, t0 + int(0.7 * budget_ns))
    warm = []
    while len(warm) < passes and (not warm or pc() < t0 + budget_ns):
        warm.append([eng.split_walk(compiled, w) for w in walks])
    row["cold"], row["warm"] = _split_stats([cold]), _split_stats(warm)
    row["rejected"] = [{"walk": wi, "step": r[2]["at"], "token": eng.vd.tokens[task["walks"][wi][r[2]["at"]]].decode("utf-8", "replace"),
                        "text_before": b"".join(eng.vd.tokens[t] for t in walks[wi])[-40:].decode("utf-8", "replace")}
                       for wi, r in enumerate(cold) if r[2] and r[2]["why"] == "rejected"]
    row["tokens_walked"], row["tokens_total"] = sum(reach), sum(len(w) for w in task["walks"])
    row["cut_by_time"] = sum(1 for r in cold if r[2] and r[2]["why"] == "time")
    row["slowest_cold"] = _slowest([cold], walks, eng.vd.tokens)
    row["slowest_warm"] = _slowest(warm, walks, eng.vd.tokens)
    row["steps"] = sum(len(r[0]) for r in cold)
    row["warm_passes"] = len(warm)
    if eng.name == "onyx":
        row["num_states"] = int(compiled.num_states)
        row["states_built"] = int(compiled.states_built)
    return row


def run_pushdown_rows(vname: str, engines, pats, opts: dict, task_timeout: float) -> tuple[list[dict], dict]:
    """The walks of every pushdown pattern (made in this process from Onyx's masks), then every
    (engine, pattern) row, each engine in a worker process; (rows, per pattern its walks)."""
    t_start = time.perf_counter()
    vd = peers.VocabData(vname)
    tasks, walk_info = {}, {}
    for pi, (name, kind, spec, sample) in enumerate(pats):
        g = peers.onyx_compile(vd.onyx_vocab, kind, spec)
        sample_toks, _ = vd.tokenize_sample(kind, spec, sample)
        walks = make_walks(vd, g, sample_toks, opts["random_walks"], opts["walk_len"], opts["seed"] + pi)
        ref, ref_idx = reference_masks(vd, g, walks)
        toks = [w["tokens"] for w in walks]
        tasks[name] = {"kind": kind, "spec": spec, "walks": toks, "ref": ref, "ref_idx": ref_idx,
                       "passes": opts["passes"], "budget_s": opts["row_budget_s"]}
        walk_info[name] = {"pattern_text": pattern_label(kind, spec), "seed": opts["seed"] + pi,
                           "walks": [{"name": w["name"], "tokens": len(w["tokens"]),
                                      "bytes": len(g.spell(w["tokens"])),
                                      "max_nesting": nesting_depth(g.spell(w["tokens"]))} for w in walks],
                           "distinct_onyx_masks": len(ref)}
        print(f"[{time.perf_counter() - t_start:6.1f}s] {vname:8} walks    {name:9} "
              f"{sum(len(t) for t in toks)} tokens, nesting up to "
              f"{max(w['max_nesting'] for w in walk_info[name]['walks'])}", file=sys.stderr, flush=True)
    rows = []
    for engine in engines:
        why = peers.peer_available(engine)
        worker = None
        for name, kind, spec, _ in pats:
            row = {"vocab": vname, "vocab_size": vd.size, "engine": engine, "pattern": name, "kind": kind}
            if why:
                row["error"] = why
            else:
                if worker is None or not worker.alive():
                    worker = harness.Worker(peers.open_adapter, (engine, vname), task_timeout)
                if worker.error:
                    row["error"] = worker.error
                    worker = None
                else:
                    res, err = worker.run(run_pushdown, tasks[name], task_timeout)
                    row["error"] = err
                    if res:
                        row.update(res)
            rows.append(row)
            w = (row.get("warm") or {}).get("mask") or {}
            status = row.get("error") or f"warm mask median {fmt(w.get('median_us'))} µs, p99 {fmt(w.get('p99_us'))} µs"
            print(f"[{time.perf_counter() - t_start:6.1f}s] {vname:8} {engine:13} {name:9} {status[:120]}",
                  file=sys.stderr, flush=True)
        if worker is not None:
            worker.close()
    return rows, walk_info


def evaluate_pushdown(rows) -> list[dict]:
    """Onyx's mask time against the targets, cold and warm: median <= TARGET_PD_MEDIAN_US and
    p99 <= TARGET_PD_P99_US (max reported); mask + advance judged the same way, for information."""
    out = []
    for r in rows:
        if r["engine"] != "onyx":
            continue
        t = {"vocab": r["vocab"], "pattern": r["pattern"]}
        if r.get("error"):
            t["error"] = r["error"]
        else:
            for phase in ("cold", "warm"):
                for what in ("mask", "step"):
                    s = r[phase][what]
                    t[f"{phase}_{what}"] = {
                        "median_us": s["median_us"], "p99_us": s["p99_us"], "max_us": s["max_us"],
                        "pass": s["median_us"] <= TARGET_PD_MEDIAN_US and s["p99_us"] <= TARGET_PD_P99_US}
        out.append(t)
    return out


def _trio(s: dict | None) -> str:
    if not s:
        return "n/a"
    return f"{fmt(s['median_us'])} / {fmt(s['p99_us'])} / {fmt(s['max_us'])}"


def print_pushdown(rows, walk_info, targets, opts_passes: int):
    print("\nPushdown walks: the sample's walk and seeded random walks through each context-free "
          "pattern, the same tokens for every engine")
    for name, info in walk_info.items():
        ws = info["walks"]
        print(f"  {name:9} {info['pattern_text']:16} {len(ws)} walks, {sum(w['tokens'] for w in ws)} tokens, "
              f"{sum(w['bytes'] for w in ws)} bytes, nesting up to {max(w['max_nesting'] for w in ws)}, "
              f"{info['distinct_onyx_masks']} distinct Onyx masks")
    cols = ["pattern", "engine", "states", "compile ms", "cold mask µs med/p99/max", "warm mask µs med/p99/max",
            "warm adv µs med/p99", "warm mask+adv µs med/p99/max", "masks ≠ Onyx", "note"]
    lines = []
    for r in rows:
        if r.get("error"):
            lines.append([r["pattern"], r["engine"], "", "", "", "", "", "", "", r["error"][:80]])
            continue
        wa = r["warm"]["advance"]
        notes = []
        ag = r.get("agreement")
        if ag:
            dis = f"{ag['states_differing']}/{ag['states_compared']}"
            if ag["states_differing"]:
                dis += f" ({ag['relation']})"
        else:
            dis = "-"
        if r.get("rejected"):
            notes.append("rejects " + ", ".join(f"{x['token']!r} after {x['text_before'][-12:]!r}"
                                                for x in r["rejected"][:2]))
        if r.get("cut_by_time"):
            notes.append(f"time budget: walked {r['tokens_walked']}/{r['tokens_total']} tokens")
        if r.get("warm_passes", 0) < opts_passes:
            notes.append(f"{r['warm_passes']} warm pass(es)")
        lines.append([r["pattern"], r["engine"], str(r["steps"]), fmt(r["compile_ms"]), _trio(r["cold"]["mask"]),
                      _trio(r["warm"]["mask"]),
                      f"{fmt(wa['median_us'])} / {fmt(wa['p99_us'])}" if wa else "n/a",
                      _trio(r["warm"]["step"]), dis, "; ".join(notes)[:100]])
    widths = [max(len(c), *(len(l[i]) for l in lines)) if lines else len(c) for i, c in enumerate(cols)]
    right = set(range(2, 9))

    def line(vals):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    print()
    print(line(cols))
    print("  ".join("-" * w for w in widths))
    prev = None
    for l in lines:
        if prev and l[0] != prev:
            print()
        prev = l[0]
        print(line(l))
    print("\nstates = masks timed per pass (every state along every walk); cold = one pass on a freshly "
          "compiled grammar, warm = the passes after it; masks ≠ Onyx = states where the engine's mask "
          "(EOS aside) differs from Onyx's.")
    print(f"\nTargets (Onyx, pushdown): mask median <= {TARGET_PD_MEDIAN_US} µs and p99 <= "
          f"{TARGET_PD_P99_US} µs along the walks (max reported); mask + advance shown for information")
    for t in targets:
        label = f"  {t['vocab']:8} {t['pattern']:9}"
        if "error" in t:
            print(f"{label} ERROR {t['error'][:100]}")
            continue
        parts = []
        for phase in ("cold", "warm"):
            m, s = t[f"{phase}_mask"], t[f"{phase}_step"]
            parts.append(f"{phase} mask {'PASS' if m['pass'] else 'FAIL'} ({_trio(m)})  "
                         f"mask+adv {'pass' if s['pass'] else 'miss'} ({_trio(s)})")
        print(f"{label} " + "   ".join(parts))
    bad = [t for t in targets if "error" in t or not (t["cold_mask"]["pass"] and t["warm_mask"]["pass"])]
    print(f"  pushdown mask targets: {'PASS' if not bad else 'FAIL'}: {len(targets) - len(bad)}/{len(targets)} patterns pass")
