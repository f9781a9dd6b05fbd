"""Adaptive concurrency limit at the front door (AIMD on in-service latency).

A fixed queue bound holds a fixed number of tickets, not a fixed wait: on 2 cores, 768
tickets in flight are 20 s of queue. Little's law says the in-flight count that keeps
latency at a target is throughput x target, and both move with the mix and the machine,
so the limit is found by feedback (TCP's AIMD, as in Envoy's adaptive concurrency and
Netflix's concurrency-limits): when the last interval's P99 is over the target the
limit shrinks by a factor; when it held and the limit was reached, it grows by a step.
Tickets over the limit are refused at once (503 overloaded, Retry-After) before they
cost any work behind the ingress.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator


class AdmissionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="adapt the limit; off: it stays at max_limit")
    target_p99_ms: float = Field(2000.0, gt=0, description="in-service P99 of accepted tickets the limit aims to hold")
    initial_limit: int = Field(64, ge=1, description="tickets in flight allowed at start")
    min_limit: int = Field(16, ge=1, description="the limit never goes below this")
    max_limit: int = Field(768, ge=1, description="the limit never goes above this (the fixed bound when off)")
    decrease_factor: float = Field(0.8, gt=0, lt=1, description="multiplier when P99 was over the target")
    increase_step: int = Field(2, ge=1, description="added when P99 held and the limit was reached")
    interval_s: float = Field(1.0, gt=0, description="how often the limit is reconsidered")

    @model_validator(mode="after")
    def _ordered(self) -> AdmissionConfig:
        if not self.min_limit <= self.initial_limit <= self.max_limit:
            raise ValueError(
                f"need min_limit <= initial_limit <= max_limit, got {self.min_limit}, {self.initial_limit}, {self.max_limit}"
            )
        return self


class AdaptiveConcurrency:
    def __init__(self, config: AdmissionConfig, now: float):
        self._config = config
        self.limit: int = config.initial_limit if config.enabled else config.max_limit
        self._decided_at = now

    def due(self, now: float) -> bool:
        return self._config.enabled and now - self._decided_at >= self._config.interval_s

    def update(self, p99_ms: float | None, peak_inflight: int, now: float) -> int:
        """`p99_ms` of tickets answered since the last update (None: none), `peak_inflight`
        the most tickets in flight at once meanwhile."""
        c = self._config
        if not self.due(now):
            return self.limit
        self._decided_at = now
        if p99_ms is not None and p99_ms > c.target_p99_ms:
            self.limit = max(c.min_limit, math.floor(self.limit * c.decrease_factor))
        elif peak_inflight >= self.limit:
            self.limit = min(c.max_limit, self.limit + c.increase_step)
        return self.limit
