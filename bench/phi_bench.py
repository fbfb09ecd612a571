#!/usr/bin/env python3
"""Φ (future-validity) reweighting benchmark: how far each estimator's sampling law is from μ*,
the model's law conditioned on validity, and what it costs.

Two tables.

1. Bounded Dyck D(3,12) and D(3,16) with the toy LM of bench/dyck.py (one bracket
   pair, 145 / 988 strings, as in the Φ paper's Table 2). Analytic TV to μ* of the laws that
   Uniform (Φ ≡ 1: plain masking, μ^proj), OneStep (definition 9) and exact Φ induce; the same
   laws sampled by the product's speculative verifier (`onyx.decoding.verify` with draft
   proposals, `onyx.decoding.phi` providers) with N, the sampling floor, the acceptance rate, δ = max
   |Φ̂ - Φ| over the trie, and the cost of `log_weights` per verified position. Plus the
   analytic TVs over 10 toy-LM seeds (mean ± std) and the structural bias (mean depth/length).

2. Finite JSON on the real default model (SmolLM2-135M-Instruct), schemas modelled on the
   paper's: status (A), type-value (B), action-target (C), method-path (D), as JSON objects (their
   full token tries are far beyond 2,000 nodes, so `ExactPhi` uses the canonical trie: each
   string in the tokenizer's own tokenization, the paper's "finite canonical JSON token trie"
   protocol), plus A as a bare enum whose full trie (every tokenization) fits. The model is
   scored at every trie prefix by the product's own `ExactPhi.prepare`. Columns: TV(μ^proj, μ*),
   TV(exact-Φ law, μ*) (analytic: numerical precision), TV(OneStep, μ*), the FVO loop (the
   product's verifier with exact Φ, draft q = the target sharpened to T = 0.5) TV to μ* with N and
   its acceptance rate, and `engine.chat(..., phi=...)` runs at temperature 1: decode tok/s for
   phi="none" / "onestep" / "exact" (decode time only; the exact trie's preparation is reported
   separately as prepare_s) and the loop's draft acceptance. For canonical tries, the laws are
   over the trie (masking restricted to trie tokens); `tv_bound` bounds TV(μ*_trie, μ*) by the
   mass the trie leaves out.

    python bench/phi_bench.py            # N = 10,000 per sampled law, 3 engine runs per kind
    python bench/phi_bench.py --quick    # N = 2,000, 1 engine run per kind

Results: tables on stdout, bench/results/phi_bench.json and phi_bench.png (or --out).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness  # noqa: E402, I001  (first: sets up onyx, OpenBLAS before mlx)

import platform  # noqa: E402
import time  # noqa: E402

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import onyx  # noqa: E402
from onyx.decoding.phi import ExactPhi, TokenTrie, _logsumexp, score_with_function  # noqa: E402

from bench.dyck import EOS, LM, OPEN, ToyLM, dyck_setup  # noqa: E402
from bench.phi_laws import (Rows, compact_grammar, empirical, fvo_sample, prepared_exact_phi,  # noqa: E402
                            providers, trie_laws, tv, tv_floor)

SCHEMAS = {
    "A status": (
        "Check the deployment and report its status as JSON.",
        {"type": "object", "properties": {"status": {"enum": ["active", "inactive", "error"]}},
         "required": ["status"], "additionalProperties": False},
    ),
    "B type-value": (
        "Give a typed value as JSON.",
        {"type": "object", "properties": {"type": {"enum": ["a", "b"]}, "value": {"enum": ["x", "y"]}},
         "required": ["type", "value"], "additionalProperties": False},
    ),
    "C action-target": (
        "Which operation should the agent run next? Answer as JSON.",
        {"type": "object",
         "properties": {"action": {"enum": ["start", "stop", "restart"]},
                        "target": {"enum": ["web", "db", "cache", "queue", "worker", "async"]}},
         "required": ["action", "target"], "additionalProperties": False},
    ),
    "D method-path": (
        "Describe the HTTP request the client sends, as JSON.",
        {"type": "object",
         "properties": {"method": {"enum": ["GET", "POST", "PUT", "DELETE"]},
                        "path": {"enum": ["/api/v1", "/metrics/v1", "/health", "/users", "/orders", "/login"]}},
         "required": ["method", "path"], "additionalProperties": False},
    ),
    "A' status enum (full trie)": (
        "Is the server up? Answer with its status.",
        {"enum": ["active", "inactive", "error"]},
    ),
}


# ------------------------------------------------------------------------------------------------
# Dyck
# ------------------------------------------------------------------------------------------------

def _timed(provider):
    """Wraps a provider's log_weights to time it (µs per verified position)."""
    if provider is None:
        return None, [0.0, 0]
    acc = [0.0, 0]
    inner = provider.log_weights

    def log_weights(*a):
        t = time.perf_counter()
        w = inner(*a)
        if w is not None:
            mx.eval(w)
        acc[0] += time.perf_counter() - t
        acc[1] += 1
        return w

    provider.log_weights = log_weights
    return provider, acc


def _phi_delta(trie, lm, exact: ExactPhi) -> dict:
    """δ = max over trie nodes and allowed tokens of |Φ̂ - Φ| for Uniform and OneStep."""
    d_u = d_o = 0.0
    for n in range(len(trie)):
        z = np.asarray(lm(trie.path(n)), dtype=np.float64)
        lp = z - _logsumexp(z)
        exact_phi = {t: np.exp(v) for t, v in exact.log_phi(n).items()}
        for y, phi in exact_phi.items():
            if y in trie.children[n]:
                c = trie.children[n][y]
                nxt = list(trie.children[c]) + (list(exact.eos) if trie.accepting[c] else [])
                one = float(np.exp(_logsumexp(lp[nxt])))
            else:
                one = 1.0
            d_u = max(d_u, abs(1.0 - phi))
            d_o = max(d_o, abs(one - phi))
    return {"uniform": d_u, "onestep": d_o, "exact": 0.0}


def _structure(law: dict) -> tuple[float, float]:
    depth = length = 0.0
    for k, p in law.items():
        h = m = 0
        for t in k:
            h += 1 if t == OPEN else -1
            m = max(m, h)
        depth += p * m
        length += p * len(k)
    return depth, length


def dyck_table(n: int, seeds: int) -> dict:
    out = {"rows": [], "seeds": {}}
    lm = LM
    for depth, length in ((3, 12), (3, 16)):
        grammar, trie, strings = dyck_setup(depth, length)
        laws = trie_laws(trie, lm, [EOS])
        phis = providers(grammar, trie, lm, 3)
        exact_law = phis["exact"].law()
        deltas = _phi_delta(trie, lm, phis["exact"])
        rows = Rows(lm, grammar, draft_temperature=2.0, width=3)
        star = laws["star"]
        # Φ̄ at the root: E_{μ^proj_root}[Φ]
        z = np.asarray(lm([]), dtype=np.float64)
        lp = z - _logsumexp(z)
        lphi = phis["exact"].log_phi(0)
        allowed = list(lphi)
        pr = np.exp(lp[allowed] - _logsumexp(lp[allowed]))
        phi_bar = float(np.sum(pr * np.exp([lphi[a] for a in allowed])))
        for name, law in (("uniform", laws["proj"]), ("onestep", laws["onestep"]), ("exact", exact_law)):
            provider, acc = _timed(phis[name])
            t0 = time.perf_counter()
            counts, accept = fvo_sample(n, grammar, rows, provider, gamma=5, seed=11)
            dt = time.perf_counter() - t0
            emp = empirical(counts)
            tokens = sum(len(k) + 1 for k in counts.elements())
            d, L = _structure(law)
            out["rows"].append({
                "grammar": f"D({depth},{length})", "strings": len(strings), "trie_nodes": len(trie),
                "estimator": name, "tv_analytic": tv(law, star), "tv_empirical": tv(emp, star),
                "tv_empirical_to_own_law": tv(emp, law), "floor_own_law": tv_floor(law, n),
                "floor_mu_star": tv_floor(star, n), "n": n, "acceptance": accept, "delta": deltas[name],
                "phi_bar_root": phi_bar, "us_per_position": (1e6 * acc[0] / acc[1]) if acc[1] else 0.0,
                "loop_tokens_per_s": tokens / dt, "mean_depth": d, "mean_length": L,
            })
        d, L = _structure(star)
        out.setdefault("mu_star_structure", {})[f"D({depth},{length})"] = {"mean_depth": d, "mean_length": L}
        per = {"uniform": [], "onestep": [], "exact": []}
        for seed in range(seeds):
            m = ToyLM(bias=lm.bias, sigma=lm.sigma, seed=seed)
            ls = trie_laws(trie, m, [EOS])
            ex = ExactPhi(max_nodes=100_000).fit(trie, score_with_function(trie, m), grammar=grammar, vocab_size=3).law()
            per["uniform"].append(tv(ls["proj"], ls["star"]))
            per["onestep"].append(tv(ls["onestep"], ls["star"]))
            per["exact"].append(tv(ex, ls["star"]))
        out["seeds"][f"D({depth},{length})"] = {k: {"mean": float(np.mean(v)), "std": float(np.std(v)),
                                                     "onestep_beats_uniform": None} for k, v in per.items()}
        out["seeds"][f"D({depth},{length})"]["onestep"]["onestep_beats_uniform"] = int(
            sum(o < u for o, u in zip(per["onestep"], per["uniform"])))
        out["seeds"][f"D({depth},{length})"]["n_seeds"] = seeds
    return out


# ------------------------------------------------------------------------------------------------
# Finite JSON on the real model
# ------------------------------------------------------------------------------------------------

def _compact(engine, phi: ExactPhi, schema) -> dict:
    """The trie in a compact vocabulary (its own tokens, OTHER, EOS) with the product-scored
    log-probabilities: tokens not scored at a node (not children or grandchildren) get -inf, so
    masking stays inside the trie; OTHER carries the remaining mass, so every row's softmax gives
    the model's probabilities."""
    trie = phi.trie
    c = compact_grammar(engine, trie, schema)
    to_small, other, eos, width, g = (c[k] for k in ("to_small", "other", "eos", "width", "grammar"))
    small = TokenTrie.from_sequences(g, [[to_small[t] for t in s] for s in trie.sequences()], mode=trie.mode,
                                     max_nodes=100_000)
    rows = {}
    for n in range(len(trie)):
        row = np.full(width, -np.inf)
        known = []
        for t, v in phi.node_lp[n].items():
            if t in phi.eos:
                continue
            row[to_small[t]] = v
            known.append(v)
        e = _logsumexp(np.array([phi.node_lp[n][x] for x in phi.eos]))
        known.append(e)
        row[eos] = e
        row[other] = np.log(max(1.0 - float(np.sum(np.exp(known))), 1e-300))
        rows[tuple(to_small[t] for t in trie.path(n))] = row
    return dict(grammar=g, trie=small, width=width, eos=eos, logits_of=lambda path: rows[tuple(path)])


def _phi_law(phi: ExactPhi) -> dict:
    """The law the exact-Φ-reweighted kernel induces (forward DP over the trie, float64)."""
    trie, lp = phi.trie, phi.node_lp
    out = {}
    stack = [(0, 0.0)]
    while stack:
        n, acc = stack.pop()
        w = {y: lp[n][y] + v for y, v in phi.log_phi(n).items()}
        z = _logsumexp(np.array(list(w.values())))
        if trie.accepting[n]:
            out[tuple(trie.path(n))] = float(np.exp(acc + _logsumexp(np.array([w[e] for e in phi.eos])) - z))
        for y, c in trie.children[n].items():
            stack.append((c, acc + w[y] - z))
    return out


def json_table(engine, n: int, runs: int, names: list[str]) -> list[dict]:
    out = []
    for name in names:
        prompt_text, schema = SCHEMAS[name]
        messages = [{"role": "user", "content": prompt_text}]
        ids = engine.chat_ids(messages)
        grammar = engine.compile(json_schema=schema)
        phi = prepared_exact_phi(engine, ids, grammar)
        c = _compact(engine, phi, schema)
        laws = trie_laws(c["trie"], c["logits_of"], [c["eos"]])
        star = laws["star"]
        # exact-Φ law from the product's Φ (big-vocabulary ids), mapped to the compact ids
        big_ids = sorted({t for t in phi.trie.token[1:]})
        to_small = {t: i for i, t in enumerate(big_ids)}
        phi_law = {tuple(to_small[t] for t in k): v for k, v in _phi_law(phi).items()}
        # the FVO loop (the product's verifier) with exact Φ, in the compact vocabulary
        small_phi = ExactPhi(max_nodes=100_000).fit(c["trie"], score_with_function(c["trie"], c["logits_of"]),
                                                   grammar=c["grammar"], vocab_size=c["width"])
        rows = Rows(c["logits_of"], c["grammar"], draft_temperature=0.5,
                      width=c["width"])
        t0 = time.perf_counter()
        counts, accept = fvo_sample(n, c["grammar"], rows, small_phi, gamma=4, seed=5)
        loop_s = time.perf_counter() - t0
        counts_none, accept_none = fvo_sample(n, c["grammar"], rows, None, gamma=4, seed=6)
        emp, emp_none = empirical(counts), empirical(counts_none)
        text = {}
        for k, v in star.items():
            s = engine.loaded.tokenizer.decode([big_ids[t] for t in k])
            text[s] = text.get(s, 0.0) + v
        proj_text = {}
        for k, v in laws["proj"].items():
            s = engine.loaded.tokenizer.decode([big_ids[t] for t in k])
            proj_text[s] = proj_text.get(s, 0.0) + v
        canonical_mass = None
        if phi.trie.mode == "full":  # how much of μ* the canonical tokenizations hold
            canon = {tuple(engine.loaded.tokenizer.encode(s, add_special_tokens=False)) for s in text}
            canonical_mass = float(sum(v for k, v in star.items() if tuple(big_ids[t] for t in k) in canon))
        row = {
            "schema": name, "outputs": int(sum(phi.trie.accepting)), "strings": len(text),
            "mu_star_on_canonical": canonical_mass, "trie": phi.stats["phi_trie"],
            "trie_nodes": phi.stats["phi_trie_nodes"], "forwards": phi.stats["phi_forwards"],
            "prepare_s": phi.stats["phi_prepare_s"], "valid_mass": phi.stats["phi_valid_mass"],
            "tv_bound": phi.stats["phi_tv_bound"],
            "tv_proj": tv(laws["proj"], star), "tv_exact_phi": tv(phi_law, star),
            "tv_onestep": tv(laws["onestep"], star),
            "fvo_tv": tv(emp, star), "fvo_n": n, "fvo_floor": tv_floor(star, n), "fvo_acceptance": accept,
            "fvo_samples_per_s": n / loop_s,
            "none_loop_tv_to_proj": tv(emp_none, laws["proj"]), "none_loop_floor": tv_floor(laws["proj"], n),
            "none_loop_acceptance": accept_none,
            "mu_star_top": sorted(text.items(), key=lambda kv: -kv[1])[:3],
            "mu_proj_top": sorted(proj_text.items(), key=lambda kv: -kv[1])[:3],
        }
        for kind in ("none", "onestep", "exact"):
            tps, acc, prep, valid, tot = [], [], [], [], []
            for r in range(runs):
                res = engine.chat(messages, json_schema=schema, temperature=1.0, seed=100 + r, max_tokens=64, phi=kind)
                tps.append(res.stats["tokens_per_s"])
                acc.append(res.stats.get("acceptance_rate", 0.0))
                prep.append(res.stats.get("phi_prepare_s", 0.0))
                tot.append(res.stats["total_s"])
                valid.append(bool(res.valid))
            row[f"chat_{kind}"] = {"tokens_per_s": float(np.median(tps)), "acceptance": float(np.mean(acc)),
                                   "prepare_s": float(np.median(prep)), "total_s": float(np.median(tot)),
                                   "valid": all(valid), "runs": runs}
        out.append(row)
        print(f"  {name}: done", file=sys.stderr, flush=True)
    return out


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------

def print_tables(res: dict) -> None:
    print("\nDyck (toy LM, one bracket pair): TV to μ*")
    print(f"{'grammar':9} {'estimator':9} {'analytic':>9} {'empirical':>10} {'N':>6} {'floor':>7} "
          f"{'to own law':>10} {'accept':>7} {'δ':>6} {'µs/pos':>7} {'depth':>6} {'length':>6}")
    for r in res["dyck"]["rows"]:
        print(f"{r['grammar']:9} {r['estimator']:9} {r['tv_analytic']:9.4f} {r['tv_empirical']:10.4f} {r['n']:6d} "
              f"{r['floor_mu_star']:7.4f} {r['tv_empirical_to_own_law']:10.4f} {r['acceptance']:7.3f} "
              f"{r['delta']:6.3f} {r['us_per_position']:7.1f} {r['mean_depth']:6.2f} {r['mean_length']:6.2f}")
    for g, s in res["dyck"]["mu_star_structure"].items():
        print(f"  μ* on {g}: mean depth {s['mean_depth']:.2f}, mean length {s['mean_length']:.2f}")
    for g, s in res["dyck"]["seeds"].items():
        print(f"  {g} over {s['n_seeds']} toy-LM seeds (analytic): Uniform {s['uniform']['mean']:.3f}±{s['uniform']['std']:.3f}"
              f"  OneStep {s['onestep']['mean']:.3f}±{s['onestep']['std']:.3f}"
              f" (beats Uniform on {s['onestep']['onestep_beats_uniform']}/{s['n_seeds']})"
              f"  Exact {s['exact']['mean']:.1e}")
    print("\nFinite JSON on SmolLM2-135M-Instruct (temperature 1): TV to μ* over the trie")
    print(f"{'schema':28} {'str':>4} {'outs':>4} {'trie':>9} {'nodes':>5} {'proj':>6} {'exactΦ':>8} {'1step':>6} "
          f"{'FVO':>6} {'N':>6} {'floor':>6} {'acc':>5} {'prep s':>6} {'tok/s none':>10} {'1step':>6} {'exact':>6} "
          f"{'chat acc':>8} {'bound':>7}")
    for r in res["json"]:
        print(f"{r['schema']:28} {r['strings']:4d} {r['outputs']:4d} {r['trie']:>9} {r['trie_nodes']:5d} {r['tv_proj']:6.3f} "
              f"{r['tv_exact_phi']:8.1e} {r['tv_onestep']:6.3f} {r['fvo_tv']:6.4f} {r['fvo_n']:6d} "
              f"{r['fvo_floor']:6.4f} {r['fvo_acceptance']:5.2f} {r['prepare_s']:6.1f} "
              f"{r['chat_none']['tokens_per_s']:10.1f} {r['chat_onestep']['tokens_per_s']:6.1f} "
              f"{r['chat_exact']['tokens_per_s']:6.1f} {r['chat_exact']['acceptance']:8.2f} {r['tv_bound']:7.1e}")
    for r in res["json"]:
        print(f"  {r['schema']}: μ* top {[(s, round(p, 3)) for s, p in r['mu_star_top']]}; "
              f"μ^proj top {[(s, round(p, 3)) for s, p in r['mu_proj_top']]}; "
              f"phi=none loop TV to μ^proj {r['none_loop_tv_to_proj']:.4f} (floor {r['none_loop_floor']:.4f})"
              + (f"; μ* mass off the canonical tokenizations {1 - r['mu_star_on_canonical']:.1e}"
                 if r["mu_star_on_canonical"] is not None else ""))


def plot(res: dict, path: Path):
    plt = harness.pyplot()
    if plt is None:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
    rows = res["dyck"]["rows"]
    grammars = sorted({r["grammar"] for r in rows})
    est = ["uniform", "onestep", "exact"]
    w = 0.25
    for i, e in enumerate(est):
        vals = [next(r["tv_empirical"] for r in rows if r["grammar"] == g and r["estimator"] == e) for g in grammars]
        ana = [next(r["tv_analytic"] for r in rows if r["grammar"] == g and r["estimator"] == e) for g in grammars]
        x = np.arange(len(grammars)) + (i - 1) * w
        a.bar(x, vals, w, label=f"{e} (sampled)")
        a.scatter(x, ana, color="k", marker="_", s=200, zorder=3)
    a.set_xticks(np.arange(len(grammars)), grammars)
    a.set_ylabel("TV to μ*")
    a.set_title("Dyck, toy LM (bars: product verifier loop; ticks: analytic)")
    a.legend()
    js = res["json"]
    names = [r["schema"].split(" (")[0] for r in js]
    cols = [("tv_proj", "μ^proj (Φ≡1)"), ("tv_onestep", "OneStep"), ("fvo_tv", "exact-Φ FVO loop (sampled)")]
    for i, (k, lab) in enumerate(cols):
        b.bar(np.arange(len(js)) + (i - 1) * w, [r[k] for r in js], w, label=lab)
    b.set_xticks(np.arange(len(js)), names, rotation=20, ha="right")
    b.set_ylabel("TV to μ*")
    b.set_ylim(0, 1.25)
    b.set_title("Finite JSON, SmolLM2-135M-Instruct")
    b.legend(loc="upper left", fontsize="small", ncol=3)
    return harness.save_figure(fig, path)


def main() -> None:
    ap = harness.arg_parser(__doc__, "N = 2,000, one engine run per kind")
    ap.add_argument("--schemas", default=None, help="comma-separated schema name prefixes (A,B,C,D,A')")
    ap.add_argument("--no-json", action="store_true", help="Dyck table only (no model)")
    args = ap.parse_args()
    n = 2000 if args.quick else 10_000
    runs = 1 if args.quick else 3
    out = harness.out_dir(args.out)
    t0 = time.time()
    res = {"quick": args.quick, "platform": platform.platform(), "machine": platform.machine()}
    print("Dyck ...", file=sys.stderr, flush=True)
    res["dyck"] = dyck_table(n, seeds=10)
    res["json"] = []
    if not args.no_json:
        names = list(SCHEMAS)
        if args.schemas:
            want = [s.strip() for s in args.schemas.split(",")]
            names = [k for k in names if k.split(" ")[0] in want]
        print("JSON ...", file=sys.stderr, flush=True)
        engine = onyx.Engine()
        res["model"] = engine.model_name
        res["json"] = json_table(engine, n, runs, names)
    res["elapsed_s"] = round(time.time() - t0, 1)
    print_tables(res) if res["json"] else print_tables({**res, "json": []})
    harness.save_results(out, "phi_bench", res, plot if res["json"] else None)


if __name__ == "__main__":
    main()
