"""The batch's turns for work beside decoding: what a prompt going in may add to the steps of the
generations already decoding (`Batch._prefill_budget` / `_measure`, fed step times as a real
batch would measure them), steps with a few prompt tokens carrying no drafts, and the running
compilations' turns between steps (`Batch._compile_turn`)."""

from __future__ import annotations

import pytest

from onyx.decoding.batch import COMPILE_OWED_TURNS, PLAIN_EVERY, Batch, StepInfo

BASE = 0.050  # a plain decode step of 8 generations, seconds
DECODING = 8


def run(token_s: float, steps: int, *, share: float = 0.25, compiling: bool = False) -> tuple[list[int], float]:
    """Steps a batch whose prompt tokens each add `token_s` to a step; returns the prompt tokens
    fed per step and the time they added, as a share of the plain steps' time."""
    batch = Batch(runner=None, prefill_share=share)
    for i in range(16):  # the streams decoded before the prompt arrived
        batch._measure(StepInfo(i, sequences=DECODING, rows=DECODING, logit_rows=DECODING, seconds=BASE), True)
    fed, added = [], 0.0
    for i in range(steps):
        n = batch._prefill_budget(True, True, compiling)
        seconds = BASE + token_s * n
        added += token_s * n
        fed.append(n)
        info = StepInfo(16 + i, sequences=DECODING + (n > 0), rows=DECODING + n, logit_rows=DECODING,
                        prefill_tokens=n, seconds=seconds)
        batch._measure(info, True)
    return fed, added / (steps * BASE)


@pytest.mark.parametrize("token_s", [0.0005, 0.002, 0.006])
def test_cheap_prompt_tokens_go_in_every_step_within_the_share(token_s):
    fed, added = run(token_s, 400)
    assert sum(fed[50:]) > 0.8 * (0.25 * BASE / token_s) * 350 * (PLAIN_EVERY - 1) / PLAIN_EVERY
    assert added <= 0.25 + 0.02
    assert max(fed[10:]) * token_s <= 0.25 * BASE + token_s  # no step takes much past its share


def test_a_prompt_token_dearer_than_the_share_goes_in_every_few_steps():
    # at a long history one prompt token adds 30 ms to a 50 ms step: one every few steps
    fed, added = run(0.030, 400)
    assert set(fed[10:]) == {0, 1}
    assert 0.15 <= added <= 0.25 + 0.02
    assert sum(fed) >= 0.8 * 400 * 0.25 * BASE / 0.030


def test_compilations_halve_the_prompts_share():
    _, alone = run(0.002, 400)
    _, beside = run(0.002, 400, compiling=True)
    assert beside == pytest.approx(alone / 2, rel=0.2)


def test_a_plain_step_now_and_then_while_a_prompt_goes_in():
    fed, _ = run(0.0005, 200)
    for i in range(20, 200 - PLAIN_EVERY):
        assert 0 in fed[i:i + PLAIN_EVERY], f"no plain step in steps {i}..{i + PLAIN_EVERY}"


class _Gen:
    """What `Batch._fit` reads of a generation: its round's rows and `keep_drafts`."""

    def __init__(self, drafts: int) -> None:
        self.rows = [7] + [8] * drafts

    def keep_drafts(self, n: int) -> list[int]:
        self.rows = self.rows[:1 + n]
        return self.rows


def test_a_step_with_a_few_prompt_tokens_carries_no_drafts():
    batch = Batch(runner=None)
    decoding = [_Gen(3), _Gen(0), _Gen(5)]
    prompt = _Gen(0)
    entries = [(g, list(g.rows), len(g.rows), 0, 100) for g in decoding] + [(prompt, [1, 2, 3], 0, 3, 10)]
    batch._fit(entries)
    assert [len(e[1]) for e in entries] == [1, 1, 1, 3]
    assert [e[2] for e in entries] == [1, 1, 1, 0]


def turns(seconds: list[float], share: float = 0.25) -> list[float]:
    """The compilations' turn after each of steps that took `seconds` (a batch that measured
    plain steps of BASE first)."""
    batch = Batch(runner=None, compile_share=share)
    for i in range(16):
        batch._measure(StepInfo(i, sequences=DECODING, rows=DECODING, logit_rows=DECODING, seconds=BASE), True)
    return [batch._compile_turn(s) for s in seconds]


def test_a_compilation_turn_pads_plain_steps_and_adds_nothing_to_long_ones():
    paid = turns([BASE, 0.8 * BASE, 1.4 * BASE, BASE])
    assert paid[0] == pytest.approx(0.25 * BASE)
    assert paid[1] == pytest.approx(0.25 * BASE)  # owed one turn: paid, not the whole padding
    assert paid[2] == 0.0  # a step past 1.25 plain steps gets no sleep
    assert paid[3] == pytest.approx(0.25 * BASE)  # what the long step left stays owed
    gaps = [s + p for s, p in zip([BASE, 0.8 * BASE, 1.4 * BASE, BASE], paid)]
    assert max(gaps[:2] + gaps[3:]) <= 1.25 * BASE + 1e-12


def test_turns_left_by_long_steps_are_paid_after_short_ones():
    paid = turns([1.4 * BASE, 1.4 * BASE, 0.5 * BASE, 0.5 * BASE])
    assert paid[:2] == [0.0, 0.0]
    assert paid[2] == pytest.approx(0.75 * BASE)  # three turns owed, padded up to 1.25 plain steps
    assert paid[3] == pytest.approx(0.25 * BASE)  # the last one


def test_compilations_are_never_starved_by_long_steps():
    steps = 200
    paid = turns([2 * BASE] * steps)
    # Past COMPILE_OWED_TURNS turns owed, every step pays one: the compilations' share, however
    # long the steps.
    assert sum(paid) >= 0.25 * BASE * (steps - COMPILE_OWED_TURNS - 1) - 1e-9
    assert max(paid) == pytest.approx(0.25 * BASE)  # and no more than one turn at a time
    assert turns([BASE] * 8, share=0.0) == [0.0] * 8
