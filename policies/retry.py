"""The retry matrix for calls to the model replica, and a retry budget.

Each failure cause has its own row: how long to wait, how many tries in all, and what
to answer once the tries are spent. A budget caps retries at a share of recent
requests (Finagle/Envoy style), so during an overload retries cannot multiply the load
that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from policies.hedge import HedgeConfig
from policies.window import ShareBudget

Cause = Literal["throttled", "unavailable", "out_of_memory", "timeout"]
Then = Literal["cache", "degraded"]


class RetryRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tries: int = Field(ge=1, description="tries in all, the first included")
    wait_ms: float = Field(ge=0, description="pause before each retry")
    then: Then = Field(description="answer once tries are spent: cache (stale result, else degraded) or degraded")


class RetryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="off: one try per ticket, then the row's fallback")
    # 429-like: the replica's queue is full; it will take work again soon.
    throttled: RetryRule = Field(
        default_factory=lambda: RetryRule(max_tries=3, wait_ms=200, then="cache"),
        description="replica queue full (429)",
    )
    # 503-like: the replica is gone, restarting or its engine is dead.
    unavailable: RetryRule = Field(
        default_factory=lambda: RetryRule(max_tries=2, wait_ms=500, then="degraded"),
        description="replica or engine unavailable (503)",
    )
    # A retry would only hit the same full memory; the replica reclaims memory itself.
    out_of_memory: RetryRule = Field(
        default_factory=lambda: RetryRule(max_tries=1, wait_ms=0, then="degraded"),
        description="engine out of memory",
    )
    # No answer within per_try_timeout_ms (a replica being replaced, a stuck queue): a second
    # wait as long would outlast the ticket's end-to-end budget, so answer degraded at once.
    timeout: RetryRule = Field(
        default_factory=lambda: RetryRule(max_tries=1, wait_ms=0, then="degraded"),
        description="no answer within per_try_timeout_ms",
    )
    per_try_timeout_ms: float = Field(
        20000.0, gt=0, description="a model call unanswered this long is cancelled (cause timeout); < request_timeout_s"
    )
    budget_percent: float = Field(
        10.0, ge=0, le=100, description="retries allowed, as a share of requests in the window"
    )
    budget_window_s: float = Field(10.0, gt=0, description="window the budget counts requests and retries over")
    budget_min_retries: int = Field(
        3, ge=0, description="retries always allowed per window, so a quiet service can still retry"
    )
    hedge: HedgeConfig = Field(
        default_factory=HedgeConfig, description="a second copy of a slow call, first answer wins (off by default)"
    )

    def rule(self, cause: Cause) -> RetryRule:
        # The causes are the field names (RetryConfig has one rule per Cause).
        return cast(RetryRule, getattr(self, cause))


@dataclass(frozen=True)
class RetryStep:
    retry: bool
    wait_s: float
    then: Then  # what to answer when retry is False


def next_step(config: RetryConfig, cause: Cause, tries_done: int, budget: RetryBudget, now: float) -> RetryStep:
    """After `tries_done` failed tries with `cause`: retry (after wait_s) or give up to `then`.
    A retry the matrix allows still needs the budget's permit."""
    rule = config.rule(cause)
    if config.enabled and tries_done < rule.max_tries and budget.try_spend(now):
        return RetryStep(True, rule.wait_ms / 1000, rule.then)
    return RetryStep(False, 0.0, rule.then)


class RetryBudget(ShareBudget):
    """Retries: `budget_percent` of the requests of the last `budget_window_s`, at least
    `budget_min_retries` per window."""

    def __init__(self, config: RetryConfig):
        super().__init__(config.budget_percent, config.budget_window_s, config.budget_min_retries)
