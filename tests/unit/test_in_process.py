"""LocalHandle and construct: deployment classes called in-process (topology fused)."""

import asyncio

import pytest

from deployments.in_process import LocalHandle, construct


class Stage:
    async def __init__(self, offset: int):
        await asyncio.sleep(0)
        self.offset = offset

    async def add(self, x: int) -> int:
        await asyncio.sleep(0)
        return x + self.offset

    def name(self) -> str:
        return "stage"

    async def fail(self) -> None:
        raise KeyError("boom")

    async def hang(self) -> None:
        await asyncio.sleep(60)


def test_construct_awaits_an_async_init_and_calls_go_through_remote():
    async def main():
        handle = LocalHandle(await construct(Stage, 2))
        assert await handle.add.remote(3) == 5
        assert await handle.name.remote() == "stage"
        with pytest.raises(KeyError):
            await handle.fail.remote()
        pending = handle.hang.remote()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pending, 0.01)
        assert pending.cancelled()

    asyncio.run(main())


def test_construct_takes_a_plain_init_too():
    class Plain:
        def __init__(self, v):
            self.v = v

    assert asyncio.run(construct(Plain, 4)).v == 4
