"""A caller's local view of the circuit breaker actor (deployments/nodes/breaker.py)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from ray.serve.handle import DeploymentHandle

from policies.breaker import Action


class BreakerView:
    """A caller's copy of the breaker's action; the breaker actor stays off the ticket path.

    If the actor cannot be reached the view fails open (pass): losing the breaker must
    not stop the graph, only its protection.
    """

    def __init__(
        self,
        breaker: DeploymentHandle,
        sync_interval_s: float,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._breaker = breaker
        self._interval_s = sync_interval_s
        self._timeout_s = timeout_s
        self._clock = clock
        self.action: Action = "pass"
        self._outcomes: list[tuple[bool, float]] = []
        self._synced_at = -math.inf
        self._sync: asyncio.Task | None = None
        self.unreachable = 0

    async def acquire(self) -> Action:
        self._maybe_sync()
        if self.action != "probe":
            return self.action
        try:
            return await asyncio.wait_for(self._breaker.acquire.remote(), self._timeout_s)
        except Exception:
            self.unreachable += 1
            return "pass"

    def record(self, failed: bool, duration_ms: float) -> None:
        self._outcomes.append((failed, duration_ms))
        self._maybe_sync()

    def _maybe_sync(self) -> None:
        if (self._sync is None or self._sync.done()) and self._clock() - self._synced_at >= self._interval_s:
            self._synced_at = self._clock()
            self._sync = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        outcomes, self._outcomes = self._outcomes, []
        try:
            self.action = await asyncio.wait_for(self._breaker.sync.remote(outcomes), self._timeout_s)
        except Exception:
            self.unreachable += 1
            self.action = "pass"
