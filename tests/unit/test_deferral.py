"""Background tickets held for capacity: the decision (policies.deferral) and the hold
that applies it (deployments.http.holding), on a fake clock."""

from __future__ import annotations

import asyncio

from deployments.api import ApiError
from deployments.http.holding import BackgroundHold, CapacityRefusal
from policies.deferral import DeferralConfig, hold_step

CONFIG = DeferralConfig(max_wait_s=2.0, retry_interval_ms=500, admit_below_share=0.5, max_held=3)


def test_a_held_ticket_tries_only_under_the_interactive_headroom():
    assert hold_step(CONFIG, 0.5, in_flight=9, limit=20, held=1) == "try"
    assert hold_step(CONFIG, 0.5, in_flight=10, limit=20, held=1) == "wait"  # the top half is interactive


def test_held_tickets_try_a_few_at_a_time():
    full = CONFIG.model_copy(update={"max_trying": 2})
    assert hold_step(full, 0.5, in_flight=0, limit=20, held=3, trying=1) == "try"
    assert hold_step(full, 0.5, in_flight=0, limit=20, held=3, trying=2) == "wait"


def test_a_held_ticket_gives_up_before_its_wait_would_pass_the_bound():
    assert hold_step(CONFIG, 1.5, in_flight=0, limit=20, held=1) == "try"
    assert hold_step(CONFIG, 1.6, in_flight=0, limit=20, held=1) == "refuse"  # 1.6 + 0.5 > 2.0


def test_past_max_held_and_when_off_a_background_ticket_is_refused():
    assert hold_step(CONFIG, 0.0, in_flight=0, limit=20, held=4) == "refuse"
    assert hold_step(CONFIG.model_copy(update={"enabled": False}), 0.0, 0, 20, 1) == "refuse"


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    def clock(self) -> float:
        return self.now


def refusal() -> CapacityRefusal:
    return CapacityRefusal("too many tickets in flight; retry later", 1)


def test_the_hold_answers_once_capacity_comes_and_waits_while_the_ingress_is_busy():
    time, loads, tries = FakeTime(), iter([(20, 20), (15, 20), (5, 20), (5, 20)]), []
    hold = BackgroundHold(CONFIG.model_copy(update={"max_wait_s": 10.0}), time.sleep, time.clock)

    async def attempt() -> str | ApiError:
        tries.append(time.now)
        return refusal() if len(tries) == 1 else "answered"

    answer = asyncio.run(hold.answer(attempt, refusal(), 0.0, lambda: next(loads)))
    assert answer == "answered"
    assert tries == [1.5, 2.0]  # waited out two busy looks; refused once more; then answered
    assert hold.held == 0


def test_the_hold_refuses_at_its_bound_and_never_turns_another_error_into_a_wait():
    time = FakeTime()
    hold = BackgroundHold(CONFIG, time.sleep, time.clock)

    async def full() -> str | ApiError:
        return refusal()

    answer = asyncio.run(hold.answer(full, refusal(), 0.0, lambda: (0, 20)))
    assert isinstance(answer, CapacityRefusal) and answer.retry_after_s == 1
    assert time.now == 2.0  # tried at 0.5, 1.0 and 1.5; refused before a look at 2.5

    timed_out = ApiError(503, "overloaded", "no answer within 30s", 1)

    async def slow() -> str | ApiError:
        return timed_out

    time.now = 0.0
    assert asyncio.run(hold.answer(slow, refusal(), 0.0, lambda: (0, 20))) is timed_out


class YieldingTime(FakeTime):
    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)  # the other held tickets look in turn


def test_while_one_held_ticket_tries_the_others_wait_their_turn():
    time, tries, gate = YieldingTime(), [], asyncio.Event()
    hold = BackgroundHold(CONFIG.model_copy(update={"max_trying": 1, "max_wait_s": 10.0}), time.sleep, time.clock)

    async def attempt() -> str | ApiError:
        tries.append(time.now)
        await gate.wait()  # the first try stays in the path until released
        return "answered"

    async def two() -> list:
        first = asyncio.ensure_future(hold.answer(attempt, refusal(), 0.0, lambda: (0, 20)))
        second = asyncio.ensure_future(hold.answer(attempt, refusal(), 0.0, lambda: (0, 20)))
        for _ in range(8):  # the second ticket looks again and again while the first tries
            await asyncio.sleep(0)
        assert len(tries) == 1 and hold.trying == 1
        gate.set()
        return [await first, await second]

    assert asyncio.run(two()) == ["answered", "answered"]
    assert len(tries) == 2 and hold.trying == 0 and hold.held == 0
