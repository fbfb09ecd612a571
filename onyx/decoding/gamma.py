"""How many tokens to draft per round: a fixed γ, or adaptive γ priced per device.

The decoding loop asks `next()` for the model / lookup drafts of a round and `forced_limit()`
for the grammar-forced ones on top, then reports what was accepted with `update()`. A batched
step of several sequences then keeps, of all their drafts, the ones that pay at the step's
width (`fit_rows`, from the step cost against rows).

The costs are a calibration, measured by a bench, not constants of the algorithm: they live in
`step_cost.json` beside this module, one entry per cost profile (`cost_profile`: the device, and
on the CPU whether the weights are quantized, since the shim's quantized products grow with the
rows far more steeply than float32 ones), with where they come from (model, machine, bench
command, commit); `python bench/batch_json_bench.py --rows --write-calibration` measures the
loaded model's profile again and rewrites its entry.
"""

from __future__ import annotations

import json
from pathlib import Path

CALIBRATION_FILE = Path(__file__).with_name("step_cost.json")


def load_calibration(path: Path = CALIBRATION_FILE) -> dict:
    """Per device: `step_cost` as ((rows, cost), ...), `width_cost` and `max_rows`."""
    data = json.loads(path.read_text())
    return {device: {"step_cost": tuple((int(r), float(c)) for r, c in entry["step_cost"]),
                     "width_cost": float(entry["width_cost"]), "max_rows": entry["max_rows"]}
            for device, entry in data.items() if isinstance(entry, dict) and "step_cost" in entry}


CALIBRATION = load_calibration()


class GammaController:
    """Chooses the number of draft tokens per round.

    A fixed `gamma`, or adaptive (`"auto"`): with the recent acceptance rate a (an exponential
    average), a round with g drafts yields (1 - a^(g+1)) / (1 - a) tokens on average and costs
    one target forward, wider by `width_cost` of a step per draft, plus g draft steps
    (`draft_cost`: a draft step's cost in target steps, from the models' weight bytes since
    decoding is memory-bound; 0 for model-free drafts). It picks the g that maximises tokens per
    unit cost, so a poor or expensive draft source drives g to 0, i.e. plain decoding. The costs
    are fixed per device, not timed, so a seeded request draws the same output every run.

    Width cost: a lone sequence's forward over 1 + g tokens costs about 1 + `width_cost` g single
    steps (the device's calibration); on Metal, verifying a few more tokens is nearly free.

    Prompt-lookup drafts are priced by the length of the n-gram they continue (`match`): each
    length has its own acceptance rate, since a draft that continues three repeated tokens is
    far likelier to be right than one that continues a single common token (on the serving
    bench's regex load, greedy, trigram matches are accepted far more often than unigram ones).
    One rate for all would let a few failed unigram guesses stop every lookup draft."""

    PRIOR = 0.6  # acceptance of model / lookup drafts before a request has seen any

    def __init__(self, gamma: int | str, *, max_gamma: int = 7, device: str = "cpu",
                 draft_cost: float = 0.0) -> None:
        self.adaptive = gamma == "auto"
        self.fixed = 0 if self.adaptive else int(gamma)
        # Adaptive rounds draft at most max_gamma tokens in all: past 1 + 7 rows a lone
        # sequence's rows cost more each (`bench/batch_json_bench.py --rows`, cases 1x8, 1x16).
        self.max_gamma = max_gamma
        self.cap = max_gamma if self.adaptive else self.fixed
        self.width_cost = self.default_width_cost = _device(device)["width_cost"]
        self.acceptance = self.PRIOR  # of model drafts
        self.by_match: dict[int, float] = {}  # of lookup drafts, per matched n-gram length
        # Grammar-forced drafts (jump-forward) fail mostly at a span's first token, where the
        # target may spell the bytes its own way; past it they are nearly always taken. So
        # two rates: the first forced token's, and each later one's given the one before.
        self.forced_first = 0.9
        self.forced_rest = 0.9
        self.draft_cost = draft_cost
        self.idle: dict[int | None, int] = {}  # rounds in which drafting did not pay, per rate

    def price(self, row_cost: float | None) -> None:
        """Sets the cost of one draft row for the next rounds, in units of this sequence's share
        of a step (None: a lone sequence's forward, the device's `width_cost`). A batched step prices its rows
        with `batch_row_cost`."""
        self.width_cost = self.default_width_cost if row_cost is None else row_cost

    def rate(self, match: int | None = None) -> float:
        """The acceptance rate of model drafts (`match` None) or of lookup drafts continuing a
        `match`-token n-gram."""
        return self.acceptance if match is None else self.by_match.get(match, self.PRIOR)

    def next(self, match: int | None = None) -> int:
        """Model drafts (or lookup drafts continuing a `match`-token n-gram) to ask for this
        round."""
        if not self.adaptive:
            return self.fixed
        best = self._best(min(max(self.rate(match), 0.0), 0.99))
        if best == 0 and self._best(0.99) > 0:
            # Probe again now and then: the text may have become predictable (never when even
            # near-perfect acceptance would not pay for the drafts). Counted per rate, so that
            # each match length gets its own probes.
            self.idle[match] = idle = self.idle.get(match, 0) + 1
            if idle % 16 == 0:
                return 1
        return best

    def forced_limit(self) -> int | None:
        """How many grammar-forced drafts may come on top of `next()`'s (None with a fixed γ:
        they count toward it). They cost no draft steps, only width; the i-th is taken with
        probability forced_first * forced_rest^(i-1)."""
        if not self.adaptive:
            return None
        return self._best(self.forced_first, self.forced_rest, draft_cost=0.0)

    def _best(self, first: float, rest: float | None = None, draft_cost: float | None = None) -> int:
        """The g with the most tokens per unit cost (0: drafting does not pay) when the first
        draft is taken with probability `first` and each later one, given the one before, with
        `rest` (default: `first`). A round yields 1 + first (1 + rest + ... + rest^(g-1)) tokens."""
        rest = first if rest is None else rest
        draft_cost = self.draft_cost if draft_cost is None else draft_cost
        best, best_rate = 0, 1.0
        tokens, taken = 1.0, first  # taken: probability that draft g is accepted
        for g in range(1, self.max_gamma + 1):
            tokens += taken
            taken *= rest
            cost = 1.0 + self.width_cost * g + draft_cost * g
            if tokens / cost > best_rate:
                best, best_rate = g, tokens / cost
        return best

    def odds(self, sources: list[str], match: int | None = None) -> list[float]:
        """For each draft of a round (its sources in order: forced ones first; lookup drafts
        continuing a `match`-token n-gram), the estimated probability that it is accepted, i.e.
        that it and every draft before it are taken."""
        out, p, forced = [], 1.0, 0
        rate = self.rate(match)
        for source in sources:
            if source == "forced":
                p *= self.forced_first if forced == 0 else self.forced_rest
                forced += 1
            else:
                p *= rate
            out.append(p)
        return out

    def update(self, drafted: int, accepted: int, forced_drafted: int = 0, forced_accepted: int = 0,
               match: int | None = None) -> None:
        """Counts of one round (its lookup drafts continued a `match`-token n-gram; None for model
        drafts). Model / lookup drafts after a rejected forced one were never tested: call with
        drafted <= 0 then (nothing is learnt about them)."""
        if drafted > 0 and accepted >= 0:
            rate = 0.8 * self.rate(match) + 0.2 * (accepted / drafted)
            if match is None:
                self.acceptance = rate
            else:
                self.by_match[match] = rate
        if forced_drafted:
            self.forced_first = 0.8 * self.forced_first + 0.2 * (forced_accepted > 0)
            tested = min(forced_drafted, forced_accepted + 1) - 1  # later forced tokens verified
            if forced_accepted > 0 and tested > 0:
                self.forced_rest = 0.8 * self.forced_rest + 0.2 * ((forced_accepted - 1) / tested)


def cost_profile(device: str, dtype: str) -> str:
    """The calibration entry a model's steps are priced with: "cpu-quantized" for a CPU model
    whose products read quantized weights (its `dtype` names bits, e.g. "float32+q4,q8"), else
    the device ("cpu", "gpu"). A profile the file has no entry for is priced as "cpu"."""
    return "cpu-quantized" if device == "cpu" and "+q" in dtype else device


def _device(device: str) -> dict:
    return CALIBRATION.get(device, CALIBRATION["cpu"])


def step_cost(rows: int, device: str = "cpu") -> float:
    """A forward over `rows` rows, in single-token forwards (extrapolated past the table)."""
    pts = _device(device)["step_cost"]
    if rows <= pts[0][0]:
        return pts[0][1]
    for (r0, c0), (r1, c1) in zip(pts, pts[1:]):
        if rows <= r1:
            return c0 + (c1 - c0) * (rows - r0) / (r1 - r0)
    (r0, c0), (r1, c1) = pts[-2], pts[-1]
    return c1 + (c1 - c0) * (rows - r1) / (r1 - r0)


def batch_row_cost(sequences: int, rows: int, device: str = "cpu") -> float | None:
    """What one more draft row costs a sequence in a batched step, in units of its share of the
    step: with S sequences and R rows, a step costs T(R) and each sequence's share is T(R) / S,
    so a row costs S (T(R + 1) - T(R)) / T(R). This is the price at which a sequence's extra
    tokens pay for the time they add to everyone's step. None for a lone sequence (its own
    forward: the device's `width_cost`)."""
    if sequences <= 1:
        return None
    t = step_cost(rows, device)
    return sequences * (step_cost(rows + 1, device) - t) / t


def row_limit(device: str = "cpu") -> int | None:
    """The most decode rows (pending tokens plus drafts) one batched step should run."""
    return _device(device)["max_rows"]


def fit_rows(drafts: list[list[float]], extra: int, device: str = "cpu", limit: int | None = None) -> list[int]:
    """Which drafts a batched step runs: `drafts[i]` holds sequence i's drafts' odds of being
    accepted (the probability that its round gets that far; non-increasing along a round, so a
    round keeps a prefix), `extra` the step's other rows (the pending tokens). Keeps the drafts
    with the best odds, as many as maximise the expected tokens per unit of step cost,
    (extra + the kept odds) / step_cost(extra + kept), within `limit` rows (default: the
    device's `row_limit`). Returns the count each sequence keeps."""
    limit = row_limit(device) if limit is None else limit
    ranked = sorted((-p, j, i) for i, odds in enumerate(drafts) for j, p in enumerate(odds))  # ties: spread
    room = len(ranked) if limit is None else max(0, min(len(ranked), limit - extra))
    best_n, best_rate, tokens = 0, extra / step_cost(extra, device), float(extra)
    for n in range(1, room + 1):
        tokens -= ranked[n - 1][0]
        rate = tokens / step_cost(extra + n, device)
        if rate > best_rate:
            best_n, best_rate = n, rate
    keep = [0] * len(drafts)
    for _, _, i in ranked[:best_n]:
        keep[i] += 1
    return keep
