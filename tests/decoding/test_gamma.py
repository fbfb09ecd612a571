"""How many drafts per round: a fixed γ, or adaptive γ priced per device and draft source."""

from __future__ import annotations

from onyx.decoding.gamma import GammaController, fit_rows, row_limit, step_cost


def test_adaptive_gamma_prices_drafts():
    free = GammaController("auto")  # model-free drafts on the CPU
    for _ in range(20):
        free.update(4, 4)
    assert free.next() >= 4  # reliable free drafts: speculate far
    for _ in range(40):
        free.update(4, 0)
    picks = [free.next() for _ in range(32)]
    assert picks.count(0) >= 30 and 1 in picks  # useless drafts: plain decoding, with rare probes
    twin = GammaController("auto", draft_cost=1.0)  # a draft model as big as the target
    for _ in range(20):
        twin.update(4, 4)
    assert [twin.next() for _ in range(40)] == [0] * 40  # never pays, never probes
    small = GammaController("auto", draft_cost=0.07)  # e.g. a 0.5B draft for a 7B target
    for _ in range(20):
        small.update(4, 3)
    assert small.next() >= 2
    assert GammaController("auto", device="gpu").width_cost < GammaController("auto").width_cost
    assert GammaController(3).next() == 3 and GammaController(3).forced_limit() is None
    jf = GammaController("auto")  # forced drafts are priced by their own acceptance
    assert 0 < jf.forced_limit() <= jf.cap == 7
    for _ in range(30):
        jf.update(0, 0, 4, 0)  # the target never takes the forced tokenization
    assert jf.forced_limit() == 0
    jf.update(2, -1, 3, 1)  # a forced draft was rejected: the lookup drafts after it taught nothing
    assert jf.acceptance == 0.6
    # Forced spans fail at their first token (another spelling) or not at all: half the spans
    # missing still pays for whole spans; spans taken only for their first token pay for one.
    whole = GammaController("auto")
    for i in range(40):
        whole.update(0, 0, 4, 4 if i % 2 else 0)
    assert whole.forced_limit() == whole.cap
    head = GammaController("auto")
    for _ in range(40):
        head.update(0, 0, 4, 1)
    assert head.forced_limit() == 1


def test_lookup_drafts_are_priced_by_the_length_of_their_match():
    g = GammaController("auto")
    g.price(0.52)  # a first extra row's price among eight sequences (`batch_row_cost(8, 8)`)
    for _ in range(10):
        g.update(1, 0, match=1)  # unigram matches: never right
        g.update(3, 3, match=3)  # trigram matches: always right
    assert g.next(1) == 0 and g.next(3) >= 3
    assert g.rate(2) == g.rate() == GammaController.PRIOR  # no other length (nor model drafts) learnt from these
    assert g.odds(["lookup"] * 2, 3)[1] > 0.8 > 0.1 > g.odds(["lookup"], 1)[0]
    # one shared rate would have stopped every lookup draft
    shared = GammaController("auto")
    shared.price(0.52)
    for _ in range(10):
        shared.update(1, 0)
        shared.update(3, 3)
    assert shared.next() < 3


def test_a_wide_step_keeps_the_drafts_that_pay():
    g = GammaController("auto")
    for _ in range(30):
        g.update(3, 1, 2, 2)  # forced spans always taken, lookups a third of the time
    odds = g.odds(["forced", "forced", "lookup", "lookup"])
    assert odds == sorted(odds, reverse=True) and odds[1] > 0.9 > odds[2]
    sure = g.odds(["forced"] * 7)
    # two sequences: a few rows cost little, so the likely drafts are kept; past ten rows a row
    # costs more than a one-in-three lookup brings
    keep = fit_rows([odds, sure], extra=2)
    assert keep[0] == 2 and keep[1] >= 4
    # never past the row limit, and whole prefixes of each round
    limit = row_limit("cpu")
    assert limit == 64 and row_limit("gpu") is None
    keep = fit_rows([sure] * 4, extra=4)
    assert 4 + sum(keep) <= limit and max(keep) - min(keep) <= 1
    keep = fit_rows([sure] * 10, extra=10)  # 70 likely drafts: the limit binds
    assert 10 + sum(keep) == limit and max(keep) - min(keep) <= 1
    assert fit_rows([odds] * 3, extra=3, limit=3) == [0, 0, 0]
    # eight sequences: a row costs about a third of a pending token's share of the step, so
    # drafts taken a quarter of the time never pay and likely ones do
    assert fit_rows([[0.25, 0.06]] * 8, extra=8) == [0] * 8
    assert all(k >= 1 for k in fit_rows([[0.9, 0.8]] * 8, extra=8))
    # past 32 rows the few-row kernels run in pieces, each reading the weights again: pricing
    # sees the step
    assert step_cost(33) - step_cost(32) > 2 * (step_cost(32) - step_cost(31))


def test_step_costs_come_from_the_calibration_file_with_their_provenance(tmp_path):
    import json

    from onyx.decoding import gamma

    data = json.loads(gamma.CALIBRATION_FILE.read_text())
    for device in ("cpu", "cpu-quantized", "gpu"):
        assert set(data[device]["provenance"]) >= {"model", "machine", "command", "commit", "note"}
        for rows, cost in data[device]["step_cost"]:
            assert gamma.step_cost(rows, device) == cost
    assert gamma.row_limit("cpu") == data["cpu"]["max_rows"]
    assert gamma.GammaController("auto", device="cpu").width_cost == data["cpu"]["width_cost"]
    data["cpu"]["step_cost"][1][1] = 9.0  # another file, another table
    other = tmp_path / "step_cost.json"
    other.write_text(json.dumps(data))
    assert gamma.load_calibration(other)["cpu"]["step_cost"][1] == (2, 9.0)


def test_the_bench_writes_a_calibration_that_gamma_reads(tmp_path):
    import json

    from bench.batch_json_bench import CALIBRATION_ROWS, ROW_CASES, calibration
    from onyx.decoding import gamma

    costs = {f"{s}x{r}": {"vs_one_row": 1.0 + 0.05 * (r - 1) + 0.01 * (s - 1)} for s, r in ROW_CASES}
    entry = calibration(costs)
    assert entry["step_cost"][0] == [1, 1.0] and entry["step_cost"][-1][0] == CALIBRATION_ROWS
    assert abs(entry["width_cost"] - 0.05) < 1e-9  # the lone sequence's cases: 1 + 0.05 per extra row
    path = tmp_path / "step_cost.json"
    path.write_text(json.dumps({"cpu": entry}))
    table = dict(gamma.load_calibration(path)["cpu"]["step_cost"])
    assert table[8] == round(costs["8x8"]["vs_one_row"], 2) and table[2] == round(costs["2x2"]["vs_one_row"], 2)


def test_each_kind_of_weights_is_priced_with_its_own_step_costs(engine):
    """The CPU's quantized products grow with the rows more steeply than float32 ones, so a
    model whose products read quantized weights is priced with its own calibration entry; the
    default model (quantized) gets it in the batch and in each generation's γ."""
    from onyx.decoding import gamma
    from onyx.decoding.batch import Batch

    assert gamma.cost_profile("cpu", "float32+q4,q8") == "cpu-quantized"
    assert gamma.cost_profile("cpu", "float32") == "cpu"
    assert gamma.cost_profile("gpu", "float16+q4,q8") == "gpu"
    quantized = gamma.CALIBRATION["cpu-quantized"]
    assert gamma.GammaController("auto", device="cpu-quantized").width_cost == quantized["width_cost"]
    assert gamma.step_cost(16, "cpu-quantized") == dict(quantized["step_cost"])[16]
    loaded = engine.runner.loaded
    assert "+q" in loaded.dtype  # the default keeps the GGUF's quantized weights
    assert Batch(engine.runner).profile == "cpu-quantized"


def test_the_bench_replaces_one_profile_and_keeps_the_others(tmp_path, monkeypatch):
    import json

    from bench.batch_json_bench import ROW_CASES, calibration, write_calibration
    from onyx.decoding import gamma

    path = tmp_path / "step_cost.json"
    path.write_text(gamma.CALIBRATION_FILE.read_text())
    monkeypatch.setattr(gamma, "CALIBRATION_FILE", path)
    costs = {f"{s}x{r}": {"vs_one_row": 1.0 + 0.2 * (r - 1)} for s, r in ROW_CASES}
    entry = calibration(costs, "a model, float32+q4 weights")
    assert write_calibration(entry, "cpu-quantized") == path
    written = gamma.load_calibration(path)
    assert written["cpu-quantized"]["step_cost"] == tuple(tuple(p) for p in entry["step_cost"])
    assert written["cpu"] == gamma.CALIBRATION["cpu"] and written["gpu"] == gamma.CALIBRATION["gpu"]
    tables = [line for line in path.read_text().splitlines() if '"step_cost"' in line]
    assert len(tables) == len(json.loads(path.read_text())) - 1  # one line per table ("about" has none)


def test_the_calibration_measures_drafts_where_they_come_and_never_prices_a_row_as_free():
    from bench.batch_json_bench import ROW_CASES, calibration, rows_per_sequence

    # a batch's extra rows fill one sequence's round before the next; a lone sequence takes all
    assert rows_per_sequence(8, 8) == [1] * 8
    assert rows_per_sequence(8, 10) == [3] + [1] * 7
    assert rows_per_sequence(8, 17) == [8, 3] + [1] * 6
    assert rows_per_sequence(2, 20) == [8, 12] and rows_per_sequence(1, 5) == [5]
    assert all(sum(rows_per_sequence(s, r)) == r for s, r in ROW_CASES)
    # a case measured cheaper than a smaller one (noise) does not make its rows free
    costs = {f"{s}x{r}": {"vs_one_row": 1.0 + 0.1 * (r - 1)} for s, r in ROW_CASES}
    costs["8x10"]["vs_one_row"] = costs["8x9"]["vs_one_row"] - 0.2
    table = calibration(costs)["step_cost"]
    assert all(c1 >= c0 for (_, c0), (_, c1) in zip(table, table[1:]))
    assert dict(table)[10] == dict(table)[9]
