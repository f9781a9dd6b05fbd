"""Ray Serve custom autoscaling policy for the model replica and the edge tier.

Serve calls it with an AutoscalingContext; the decisions are policies.autoscale (the
reactive count) and policies.prescale (a floor ahead of a surge: an operator's schedule,
the load's growth). `p95_ms` comes from the replicas' `record_autoscaling_stats`
(ModelReplica has it); deployments without it scale on queue depth alone. Serve applies
min/max replicas and its upscale/downscale delays on top, and keeps this object (its
load samples) in its controller. Where a custom policy cannot be used, delete the
`policy` key and Serve's built-in policy uses `target_ongoing_requests` instead.
"""

from __future__ import annotations

import collections
import logging
import statistics
import time
from typing import Any

from ray.serve.config import AutoscalingContext

from policies.autoscale import AutoscaleConfig, ScaleSignals, desired_replicas
from policies.prescale import LoadSample, PrescaleConfig, prescale, surge_due

logger = logging.getLogger("ray.serve")


class QueueLatencyPolicy:
    def __init__(self, prescale: dict[str, Any] | None = None, **kwargs: Any):
        """`prescale`: policies.prescale.PrescaleConfig's fields; the rest AutoscaleConfig's."""
        self._config = AutoscaleConfig(**kwargs)
        self._prescale = PrescaleConfig(**(prescale or {}))
        self._history: collections.deque[LoadSample] = collections.deque()
        self._baseline = 0.0
        self._logged: tuple[int, int] | None = None

    def __call__(self, ctx: AutoscalingContext) -> tuple[int, dict[str, Any]]:
        p95 = (ctx.aggregated_metrics or {}).get("p95_ms") or {}
        signals = ScaleSignals(
            replicas=ctx.current_num_replicas,
            ongoing_requests=ctx.total_num_requests,
            p95_ms=max(p95.values()) if p95 else None,
        )
        replicas, reason = desired_replicas(self._config, signals)
        now = ctx.current_time if ctx.current_time is not None else time.time()
        self._history.append(LoadSample(now, ctx.total_num_requests))
        while self._history[0].at_s < now - self._prescale.growth_window_s:
            self._history.popleft()
        if not surge_due(self._prescale, now):
            self._baseline = statistics.fmean(s.ongoing_requests for s in self._history)
        ahead = prescale(
            self._prescale,
            now,
            list(self._history),
            self._baseline,
            self._config.target_ongoing_per_replica,
            ctx.capacity_adjusted_max_replicas,
        )
        if ahead.floor > replicas:
            replicas, reason = ahead.floor, f"ahead of a surge: {ahead.reason}"
        # Serve calls this every control-loop tick (0.1 s) and a change waits out its
        # up/downscale delay: logged once per new decision (its reason's figures move on
        # every tick), not once per tick.
        decision = (ctx.current_num_replicas, replicas)
        if replicas != ctx.current_num_replicas and decision != self._logged:
            logger.info("%s: %d -> %d replicas (%s)", ctx.deployment_name, *decision, reason)
        self._logged = decision
        return replicas, {"last_reason": reason}
