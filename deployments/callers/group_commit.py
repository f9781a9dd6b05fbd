"""Group commit of one caller's calls to a node that takes a list: while one call is in
flight, new items queue and go together in the next. Alone, an item is sent at once;
under load one hop carries many items (the hop, not the work per item, is what costs:
Serve's router and the actor call are ~1 CPU-ms on each side)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    def __init__(self, send: Callable[[list[T]], Awaitable[list[R]]], timeout_s: float, max_batch: int = 256):
        """`send` answers a list of items with one result per item, in order."""
        self._send_batch = send
        self._timeout_s = timeout_s
        self._max_batch = max_batch
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._sender: asyncio.Task | None = None

    async def submit(self, item: T) -> R:
        """The item's own result; raises what the call raised (or TimeoutError) to every
        item of its batch alone."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())
        return await asyncio.wait_for(future, self._timeout_s)

    async def _send(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
            results: list[R] | list[Exception]
            try:
                results = await asyncio.wait_for(self._send_batch([item for item, _ in batch]), self._timeout_s)
            except Exception as e:  # every waiter of this batch learns it; the next batch tries again
                results = [e] * len(batch)
            for (_, future), result in zip(batch, results):
                if future.done():  # its caller gave up waiting
                    continue
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    future.set_result(result)
