"""Hedged model calls: the policy (delay from recent answers, the budget) with a plain
clock, and the model path racing a slow call against its copy with stand-in handles."""

import asyncio
import time

import pytest

from deployments.api import ModelAnswer, ModelUnavailable
from deployments.callers.model_path import GiveUp, ModelPath
from policies.hedge import HedgeConfig, Hedger
from policies.retry import RetryConfig
from tests.harness import as_handle

FAST = ModelAnswer("refund", 0.9, "v1")
ON = HedgeConfig(enabled=True, min_calls=10, refresh_calls=1, min_delay_ms=0)


def primed(config: HedgeConfig = ON, latency_s: float = 0.01, calls: int = 100, now: float = 0.0) -> Hedger:
    hedger = Hedger(config)
    for _ in range(calls):
        hedger.record_call(now)
        hedger.record_answer(latency_s)
    return hedger


def test_no_copy_before_enough_answers_then_the_percentile():
    hedger = Hedger(ON)
    for i in range(9):
        hedger.record_answer(0.01 * (i + 1))
        assert hedger.delay_s() is None
    hedger.record_answer(0.10)
    # Ten answers 10..100 ms: the nearest-rank P95 is the tenth.
    assert hedger.delay_s() == pytest.approx(0.10)


def test_delay_follows_recent_answers_and_has_a_floor():
    hedger = primed(HedgeConfig(enabled=True, min_calls=10, refresh_calls=1, window_calls=20, min_delay_ms=0))
    assert hedger.delay_s() == pytest.approx(0.01)
    for _ in range(20):
        hedger.record_answer(0.2)
    assert hedger.delay_s() == pytest.approx(0.2)
    floored = primed(HedgeConfig(enabled=True, min_calls=10, min_delay_ms=50))
    assert floored.delay_s() == pytest.approx(0.05)


def test_delay_is_read_again_only_every_refresh_calls():
    hedger = primed(HedgeConfig(enabled=True, min_calls=10, refresh_calls=5, window_calls=10, min_delay_ms=0))
    for _ in range(4):
        hedger.record_answer(1.0)
    assert hedger.delay_s() == pytest.approx(0.01)
    hedger.record_answer(1.0)
    assert hedger.delay_s() == pytest.approx(1.0)


def test_off_sends_no_copy():
    assert primed(HedgeConfig(enabled=False, min_calls=10)).delay_s() is None


def test_budget_caps_copies_at_their_share_of_recent_calls():
    hedger = primed(calls=100, now=0.0)  # 5 % of 100 calls: 5 copies
    assert [hedger.try_spend(1.0) for _ in range(6)] == [True] * 5 + [False]
    # The window (10 s) forgets those calls and copies: nothing to take a share of.
    assert not hedger.try_spend(11.0)
    for _ in range(40):
        hedger.record_call(11.0)
    assert [hedger.try_spend(11.0) for _ in range(3)] == [True, True, False]


class Model:
    """predict answers after the delay its outcome says; records request ids."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.calls = []
        self.cancelled = []

    def remote(self, prompt, request_id, tenant=None):
        delay_s, outcome = self.outcomes.pop(0)
        self.calls.append(request_id)

        async def answer():
            try:
                await asyncio.sleep(delay_s)
            except asyncio.CancelledError:
                self.cancelled.append(request_id)
                raise
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        return answer()

    @property
    def predict(self):
        return self


class Tokenizer:
    class tokenize:  # noqa: N801 - stands in for a handle's method
        @staticmethod
        async def remote(text):
            return [1, 2, 3]


def classify(model: Model, hedger: Hedger | None, **retry) -> tuple[object, float]:
    path = ModelPath(as_handle(Tokenizer()), as_handle(model), None, RetryConfig(hedge=ON, **retry))
    path.hedger = hedger

    async def go():
        start = time.monotonic()
        result = await path.classify("my card was charged twice", "r1")
        # Let the loser's cancellation land before the loop closes.
        await asyncio.sleep(0.05)
        return result, time.monotonic() - start

    return asyncio.run(go())


def test_a_slow_call_gets_a_copy_and_the_first_answer_wins():
    model = Model((5.0, FAST), (0.0, ModelAnswer("refund", 0.8, "v1")))
    result, took_s = classify(model, primed(latency_s=0.05, now=time.monotonic()))
    assert result == ModelAnswer("refund", 0.8, "v1")
    assert took_s < 1.0
    assert model.calls == ["r1", "r1-hedge"]
    assert model.cancelled == ["r1"]


def test_a_call_answering_before_the_delay_sends_no_copy():
    model = Model((0.0, FAST))
    result, _ = classify(model, primed(latency_s=0.5, now=time.monotonic()))
    assert result == FAST and model.calls == ["r1"]


def test_no_copy_once_the_budget_is_spent():
    hedger = primed(latency_s=0.05, calls=20, now=time.monotonic())  # one copy allowed
    assert hedger.try_spend(time.monotonic())
    model = Model((0.3, FAST))
    result, took_s = classify(model, hedger)
    assert result == FAST and model.calls == ["r1"] and took_s >= 0.3


def test_a_failed_copy_leaves_the_first_call_to_answer():
    model = Model((0.3, FAST), (0.0, ModelUnavailable("gone")))
    result, _ = classify(model, primed(latency_s=0.05, now=time.monotonic()))
    assert result == FAST and model.calls == ["r1", "r1-hedge"]


def test_both_failing_goes_to_the_retry_matrix():
    model = Model((0.1, ModelUnavailable("a")), (0.0, ModelUnavailable("b")))
    result, _ = classify(model, primed(latency_s=0.05), enabled=False)
    assert result == GiveUp("degraded", "unavailable")
