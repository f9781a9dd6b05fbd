import asyncio

import pytest

from deployments.control.batch_slots import AdjustableLimit


async def _occupy(limit, started, release):
    async with limit:
        started.append(1)
        await release.wait()


def test_limit_caps_concurrency_and_grows_at_run_time():
    async def scenario():
        limit, started, release = AdjustableLimit(2), [], asyncio.Event()
        tasks = [asyncio.create_task(_occupy(limit, started, release)) for _ in range(5)]
        await asyncio.sleep(0.01)
        assert (len(started), limit.active, limit.waiting) == (2, 2, 3)
        await limit.set_limit(4)
        await asyncio.sleep(0.01)
        assert len(started) == 4
        release.set()
        await asyncio.gather(*tasks)
        assert (len(started), limit.active, limit.waiting) == (5, 0, 0)

    asyncio.run(scenario())


def test_shrinking_drains_without_cancelling_admitted_work():
    async def scenario():
        limit, started, release = AdjustableLimit(3), [], asyncio.Event()
        tasks = [asyncio.create_task(_occupy(limit, started, release)) for _ in range(3)]
        await asyncio.sleep(0.01)
        await limit.set_limit(1)
        assert limit.active == 3  # admitted work keeps running
        late = asyncio.create_task(_occupy(limit, started, asyncio.Event()))
        await asyncio.sleep(0.01)
        assert len(started) == 3 and limit.waiting == 1
        release.set()
        await asyncio.gather(*tasks)
        await asyncio.sleep(0.01)
        assert len(started) == 4 and limit.active == 1
        late.cancel()

    asyncio.run(scenario())


def test_limit_below_one_is_refused():
    with pytest.raises(ValueError):
        AdjustableLimit(0)
