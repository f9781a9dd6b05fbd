"""When to reclaim memory on a model replica, and how hard.

Triggers: consecutive failed engine calls, out-of-memory, and the share of requests that
took longer than a timeout.
Each firing takes the next rung of a ladder (shrink the batch, free caches, restart
the engine); the ladder starts again after a calm spell.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ReclaimAction = Literal["shrink_batch", "free_caches", "restart_engine"]
ReclaimTrigger = Literal["failed_in_row", "out_of_memory", "timeout_rate"]
LADDER: tuple[ReclaimAction, ...] = ("shrink_batch", "free_caches", "restart_engine")


class ReclaimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="off: triggers are only counted, nothing is reclaimed")
    failed_in_row: int = Field(3, ge=1, description="this many failed engine calls in a row trigger")
    timeout_ms: float = Field(10_000.0, gt=0, description="an engine call slower than this counts as timed out")
    timeout_rate_percent: float = Field(10.0, gt=0, le=100, description="timed-out share of the window that triggers")
    window_calls: int = Field(200, ge=1, description="calls the timeout rate is computed over")
    min_calls: int = Field(20, ge=1, description="calls needed before the timeout rate counts")
    min_interval_s: float = Field(10.0, ge=0, description="least time between two actions, so each can take effect")
    calm_s: float = Field(120.0, gt=0, description="without a trigger this long, the ladder starts from its first rung")


@dataclass(frozen=True)
class ReclaimDecision:
    action: ReclaimAction
    trigger: ReclaimTrigger


class ReclaimMonitor:
    def __init__(self, config: ReclaimConfig):
        self._config = config
        self._failed_in_row = 0
        self._out_of_memory = False
        self._timed_out: deque[bool] = deque(maxlen=config.window_calls)
        self._rung = 0
        self._last_fired: float | None = None

    def record(self, failed: bool, out_of_memory: bool, duration_ms: float) -> None:
        self._failed_in_row = self._failed_in_row + 1 if failed else 0
        self._out_of_memory |= out_of_memory
        self._timed_out.append(duration_ms > self._config.timeout_ms)

    def decide(self, now: float) -> ReclaimDecision | None:
        c = self._config
        trigger = self._trigger()
        if trigger is None or not c.enabled:
            return None
        if self._last_fired is not None and now - self._last_fired < c.min_interval_s:
            return None
        if self._last_fired is not None and now - self._last_fired >= c.calm_s:
            self._rung = 0
        action = LADDER[min(self._rung, len(LADDER) - 1)]
        self._rung += 1
        self._last_fired = now
        # Evidence gathered before the action says nothing about after it.
        self._failed_in_row, self._out_of_memory = 0, False
        self._timed_out.clear()
        return ReclaimDecision(action, trigger)

    def _trigger(self) -> ReclaimTrigger | None:
        c = self._config
        if self._out_of_memory:
            return "out_of_memory"
        if self._failed_in_row >= c.failed_in_row:
            return "failed_in_row"
        n = len(self._timed_out)
        if n >= c.min_calls and 100.0 * sum(self._timed_out) / n > c.timeout_rate_percent:
            return "timeout_rate"
        return None
