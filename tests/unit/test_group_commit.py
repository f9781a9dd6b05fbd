"""Group commit (the anti-spam replica's rate-limit decisions, the ingress's review records), against a fake limiter."""

import asyncio

import pytest

from deployments.callers.group_commit import GroupCommit
from policies.rate_limit import Admission


class FakeLimiter:
    """Stands in for the RateLimiter: `admit_many(batch)` answers each ticket of a batch."""

    def __init__(self, delay_s: float = 0.01, fail: bool = False):
        self.batches: list[list] = []
        self.delay_s = delay_s
        self.fail = fail

    async def admit_many(self, batch):
        self.batches.append(batch)
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise ConnectionError("limiter gone")
        return [Admission("rate_limited", 2) if key == "flooder" else Admission() for key, _, _, _ in batch]


def batcher(limiter: FakeLimiter, timeout_s: float) -> GroupCommit:
    return GroupCommit(limiter.admit_many, timeout_s)


def test_concurrent_tickets_share_calls_and_get_their_own_answers():
    limiter = FakeLimiter()

    async def run():
        commit = batcher(limiter, timeout_s=1)
        assert await commit.submit(("alone", "standard", "d", None)) == Admission()
        keys = ["flooder" if i % 3 == 0 else f"user{i}" for i in range(30)]
        first = asyncio.gather(*(commit.submit((k, "standard", "d", None)) for k in keys[:10]))
        await asyncio.sleep(0.001)  # the first ten are on the wire; the rest queue behind them
        rest = asyncio.gather(*(commit.submit((k, "standard", "d", None)) for k in keys[10:]))
        return keys, await first + await rest

    keys, admissions = asyncio.run(run())
    assert [a.rule for a in admissions] == ["rate_limited" if k == "flooder" else None for k in keys]
    assert [len(b) for b in limiter.batches] == [1, 10, 20]


def test_slow_or_failing_limiter_raises_to_the_caller_and_the_next_batch_tries_again():
    async def run():
        slow = batcher(FakeLimiter(delay_s=1), timeout_s=0.05)
        with pytest.raises(asyncio.TimeoutError):
            await slow.submit(("u", "standard", "d", None))
        failing = FakeLimiter(fail=True)
        commit = batcher(failing, timeout_s=1)
        with pytest.raises(ConnectionError):
            await commit.submit(("u", "standard", "d", None))
        failing.fail = False
        return await commit.submit(("u", "standard", "d", None))

    assert asyncio.run(run()) == Admission()
