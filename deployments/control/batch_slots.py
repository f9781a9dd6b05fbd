"""A concurrency cap whose size can change while requests wait on it."""

from __future__ import annotations

import asyncio


class AdjustableLimit:
    """Like asyncio.Semaphore, but `set_limit` may shrink or grow it at run time.

    Shrinking never cancels work already admitted: the surplus drains as it finishes.
    """

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self._limit = limit
        self._active = 0
        self._waiting = 0
        self._cond = asyncio.Condition()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def active(self) -> int:
        return self._active

    @property
    def waiting(self) -> int:
        return self._waiting

    async def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        async with self._cond:
            self._limit = limit
            self._cond.notify_all()

    async def __aenter__(self) -> None:
        async with self._cond:
            self._waiting += 1
            try:
                await self._cond.wait_for(lambda: self._active < self._limit)
            finally:
                self._waiting -= 1
            self._active += 1

    async def __aexit__(self, *exc) -> None:
        async with self._cond:
            self._active -= 1
            self._cond.notify()
