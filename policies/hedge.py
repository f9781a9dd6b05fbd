"""Hedged model calls: when a call has not answered by the recent P95 of model calls, a
second copy goes out and the first answer wins (Dean & Barroso, "The Tail at Scale").

One slow replica (a noisy neighbour, a long GC, a node swapping) holds every ticket it
gets for its whole slowness; a copy sent at the P95 mark costs at most ~5 % more calls
and cuts that tail to about P95 plus one normal call. The delay is read from the calls
this caller saw (answered ones, hedges included), so it follows the model's speed. A
budget caps the copies at a share of recent calls: when the whole model path is slow
(overload), every call passes the P95 mark and copies would only double the load.
"""

from __future__ import annotations

from collections import deque

from pydantic import BaseModel, ConfigDict, Field

from policies.window import ShareBudget, nearest_rank


class HedgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        False, description="send a second copy of a slow model call; useful with two or more model replicas"
    )
    after_percentile: float = Field(
        95.0, gt=0, lt=100, description="a call unanswered past this percentile of recent calls gets its copy"
    )
    min_delay_ms: float = Field(5.0, ge=0, description="never send a copy sooner than this")
    budget_percent: float = Field(5.0, ge=0, le=100, description="copies allowed, as a share of calls in the window")
    budget_window_s: float = Field(10.0, gt=0, description="window the budget counts calls and copies over")
    window_calls: int = Field(1000, ge=1, description="recent answered calls the percentile is read from")
    min_calls: int = Field(50, ge=1, description="answered calls needed before any copy is sent")
    refresh_calls: int = Field(
        20, ge=1, description="answered calls between two readings of the percentile (sorting costs)"
    )


class Hedger:
    """One per caller process. `now` in seconds from any monotonic clock."""

    def __init__(self, config: HedgeConfig):
        self._config = config
        self._latencies: deque[float] = deque(maxlen=config.window_calls)
        self._since_refresh = 0
        self._delay_s: float | None = None
        self._budget = ShareBudget(config.budget_percent, config.budget_window_s)

    def record_call(self, now: float) -> None:
        """A first call went out: what the budget is a share of."""
        self._budget.record_request(now)

    def record_answer(self, latency_s: float) -> None:
        """An answered call (first or copy) and how long it took."""
        self._latencies.append(latency_s)
        self._since_refresh += 1
        if len(self._latencies) >= self._config.min_calls and (
            self._delay_s is None or self._since_refresh >= self._config.refresh_calls
        ):
            ordered = sorted(self._latencies)
            self._delay_s = max(
                self._config.min_delay_ms / 1000, nearest_rank(ordered, self._config.after_percentile / 100)
            )
            self._since_refresh = 0

    def delay_s(self) -> float | None:
        """How long a call waits before its copy may go; None: no copies (too few answers yet)."""
        return self._delay_s if self._config.enabled else None

    def try_spend(self, now: float) -> bool:
        """Takes one copy from the budget if there is one left."""
        return self._budget.try_spend(now)
