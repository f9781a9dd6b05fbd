"""Replica count for a deployment from its queue depth and latency, with hysteresis.

Scale up as soon as either signal is over its target; scale down only when both are
well under (`scale_down_below` of their targets), one replica at a time, so a load
hovering near a target does not make the count flap. Serve's own upscale/downscale
delays and min/max bounds apply on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field


class AutoscaleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target_ongoing_per_replica: float = Field(
        64.0, gt=0, description="requests running or queued per replica the policy aims at"
    )
    p95_target_ms: float = Field(1000.0, gt=0, description="replica p95 latency above which it scales up")
    scale_down_below: float = Field(
        0.5, gt=0, lt=1, description="scale down only when both signals are under this share of their targets"
    )


@dataclass(frozen=True)
class ScaleSignals:
    replicas: int
    ongoing_requests: float  # running + queued, summed over replicas
    p95_ms: float | None  # worst replica's p95 over the look-back; None when nothing finished
    throttled_per_s: float = 0.0  # calls the replicas refused, their bounded queues full, summed


# What decided a count: the reactive signals here, a pre-scaling floor (policies.prescale).
ScaleCause = Literal["cold_start", "idle", "queue", "throttled", "latency", "both_low", "hold", "schedule", "growth"]


class ScaleDecision(NamedTuple):
    replicas: int
    cause: ScaleCause
    detail: str  # the figures behind it, for the log


def desired_replicas(config: AutoscaleConfig, s: ScaleSignals) -> ScaleDecision:
    if s.replicas == 0:
        return (
            ScaleDecision(1, "cold_start", "cold start") if s.ongoing_requests > 0 else ScaleDecision(0, "idle", "idle")
        )
    # A replica's bounded queue refuses what it cannot hold, so under a surge the queue stops
    # growing while the demand does: the refused calls' rate times their time in service
    # (Little's law, at the p95, or at its target before any finished) is the queue they
    # would have made.
    refused = s.throttled_per_s * (s.p95_ms or config.p95_target_ms) / 1000
    by_queue = (s.ongoing_requests + refused) / config.target_ongoing_per_replica
    load = by_queue / s.replicas
    latency = (s.p95_ms or 0.0) / config.p95_target_ms
    if load > 1:
        cause: ScaleCause = (
            "queue" if s.ongoing_requests > config.target_ongoing_per_replica * s.replicas else "throttled"
        )
        return ScaleDecision(max(s.replicas + 1, math.ceil(by_queue)), cause, f"demand {load:.2f}x target ({cause})")
    if latency > 1:
        return ScaleDecision(s.replicas + 1, "latency", f"p95 {latency:.2f}x target")
    if load < config.scale_down_below and latency < config.scale_down_below and s.replicas > 1:
        return ScaleDecision(max(1, s.replicas - 1, math.ceil(by_queue)), "both_low", "both signals low")
    return ScaleDecision(s.replicas, "hold", "hold")
