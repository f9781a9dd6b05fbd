"""Background tickets refused for capacity, held and tried again (policies.deferral)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ray.serve.metrics import Counter

from deployments.api import ApiError
from deployments.metrics.metric_tags import tag_keys
from policies.deferral import DeferralConfig, hold_step

T = TypeVar("T")


class CapacityRefusal(ApiError):
    """503 overloaded because nothing is free now (the admission limit, a full queue on
    the ticket's path): what a background ticket may wait out. A timeout or a lost stage
    is not one: the ticket already had its try."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(503, "overloaded", message, retry_after_s)


class BackgroundHold:
    def __init__(
        self,
        config: DeferralConfig,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self._config = config
        self._sleep = sleep
        self._clock = clock
        self.held = 0
        self.trying = 0
        self._outcomes = Counter(
            "ticket_held_total",
            description="Background tickets held for capacity, by how their hold ended: answered or refused.",
            tag_keys=tag_keys("outcome"),
        )

    async def answer(
        self,
        attempt: Callable[[], Awaitable[T | ApiError]],
        refusal: CapacityRefusal,
        start: float,
        load: Callable[[], tuple[int, int]],
    ) -> T | ApiError:
        """Tries `attempt` again while hold_step says so; `start`: the ticket's arrival on
        `clock`; `load`: the ingress's tickets in flight and admission limit now."""
        answer: T | ApiError = refusal
        self.held += 1
        try:
            while isinstance(answer, CapacityRefusal):
                await self._sleep(self._config.retry_interval_ms / 1000)
                in_flight, limit = load()
                step = hold_step(self._config, self._clock() - start, in_flight, limit, self.held, self.trying)
                if step == "refuse":
                    break
                if step == "try":
                    self.trying += 1
                    try:
                        answer = await attempt()
                    finally:
                        self.trying -= 1
        finally:
            self.held -= 1
        self._outcomes.inc(tags={"outcome": "refused" if isinstance(answer, ApiError) else "answered"})
        return answer
