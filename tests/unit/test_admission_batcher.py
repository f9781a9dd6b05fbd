"""The anti-spam replica's group commit of rate-limit decisions, against a fake limiter."""

import asyncio

import pytest

from deployments.nodes.antispam import AdmissionBatcher
from policies.rate_limit import Admission
from tests.harness import as_handle


class FakeLimiter:
    """Stands in for the RateLimiter handle: `admit_many.remote(batch)` is awaitable."""

    def __init__(self, delay_s: float = 0.01, fail: bool = False):
        self.batches: list[list] = []
        self.delay_s = delay_s
        self.fail = fail
        self.admit_many = self

    def remote(self, batch):
        async def answer():
            self.batches.append(batch)
            await asyncio.sleep(self.delay_s)
            if self.fail:
                raise ConnectionError("limiter gone")
            return [Admission("rate_limited", 2) if key == "flooder" else Admission() for key, _, _, _ in batch]

        return answer()


def test_concurrent_tickets_share_calls_and_get_their_own_answers():
    limiter = FakeLimiter()

    async def run():
        batcher = AdmissionBatcher(as_handle(limiter), timeout_s=1)
        assert await batcher.admit("alone", "standard", "d") == Admission()
        keys = ["flooder" if i % 3 == 0 else f"user{i}" for i in range(30)]
        first = asyncio.gather(*(batcher.admit(k, "standard", "d") for k in keys[:10]))
        await asyncio.sleep(0.001)  # the first ten are on the wire; the rest queue behind them
        rest = asyncio.gather(*(batcher.admit(k, "standard", "d") for k in keys[10:]))
        return keys, await first + await rest

    keys, admissions = asyncio.run(run())
    assert [a.rule for a in admissions] == ["rate_limited" if k == "flooder" else None for k in keys]
    assert [len(b) for b in limiter.batches] == [1, 10, 20]


def test_slow_or_failing_limiter_raises_to_the_caller_and_the_next_batch_tries_again():
    async def run():
        slow = AdmissionBatcher(as_handle(FakeLimiter(delay_s=1)), timeout_s=0.05)
        with pytest.raises(asyncio.TimeoutError):
            await slow.admit("u", "standard", "d")
        failing = FakeLimiter(fail=True)
        batcher = AdmissionBatcher(as_handle(failing), timeout_s=1)
        with pytest.raises(ConnectionError):
            await batcher.admit("u", "standard", "d")
        failing.fail = False
        return await batcher.admit("u", "standard", "d")

    assert asyncio.run(run()) == Admission()
