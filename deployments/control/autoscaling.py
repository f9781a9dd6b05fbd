"""Ray Serve custom autoscaling policy for the model replica and the edge tier.

Serve calls it with an AutoscalingContext; the decisions are policies.autoscale (the
reactive count) and policies.prescale (a floor ahead of a surge: an operator's schedule,
the load's growth). `p95_ms` and `throttled_per_s` come from the replicas'
`record_autoscaling_stats` (ModelReplica has it); deployments without it scale on queue
depth alone. Serve applies min/max replicas and its upscale/downscale delays on top, and
keeps this object (its load samples) in its controller. Where a custom policy cannot be
used, delete the `policy` key and Serve's built-in policy uses `target_ongoing_requests`
instead.
"""

from __future__ import annotations

import collections
import functools
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from ray.serve.config import AutoscalingContext
from ray.serve.metrics import Counter

from deployments.metrics.metric_tags import tag_keys
from policies.autoscale import AutoscaleConfig, ScaleCause, ScaleDecision, ScaleSignals, desired_replicas
from policies.prescale import LoadSample, PrescaleConfig, prescale, surge_due

logger = logging.getLogger("ray.serve")


class QueueLatencyPolicy:
    def __init__(
        self,
        prescale: dict[str, Any] | None = None,
        record_decision: Callable[[dict[str, str]], None] | None = None,
        **kwargs: Any,
    ):
        """`prescale`: policies.prescale.PrescaleConfig's fields; the rest AutoscaleConfig's.
        `record_decision` takes each new decision's tags; by default the metric below."""
        self._config = AutoscaleConfig(**kwargs)
        self._prescale = PrescaleConfig(**(prescale or {}))
        self._history: collections.deque[LoadSample] = collections.deque()
        self._baseline = 0.0
        self._last: tuple[int, int, ScaleCause] | None = None
        # Serve keeps one policy object per deployment, in its controller: the series are
        # the controller's, a deployment's own by its tag. Serve exports the counts
        # themselves (serve_autoscaling_desired_replicas, _target_replicas).
        if record_decision is None:
            decisions = Counter(
                "autoscale_decisions_total",
                description="New decisions of the autoscaling policy (count or cause changed), by their cause.",
                tag_keys=tag_keys("application", "deployment", "cause"),
            )
            record_decision = functools.partial(decisions.inc, 1.0)
        self._record_decision = record_decision

    def __call__(self, ctx: AutoscalingContext) -> tuple[int, dict[str, Any]]:
        metrics = ctx.aggregated_metrics or {}
        p95 = metrics.get("p95_ms") or {}
        signals = ScaleSignals(
            replicas=ctx.current_num_replicas,
            ongoing_requests=ctx.total_num_requests,
            p95_ms=max(p95.values()) if p95 else None,
            throttled_per_s=sum((metrics.get("throttled_per_s") or {}).values()),
        )
        decision = desired_replicas(self._config, signals)
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
        if ahead.floor > decision.replicas:
            decision = ScaleDecision(ahead.floor, ahead.source, f"ahead of a surge: {ahead.reason}")
        # Serve calls this every control-loop tick (0.1 s) and a change waits out its
        # up/downscale delay: counted and logged once per new decision (its figures move
        # on every tick), not once per tick.
        current = (ctx.current_num_replicas, decision.replicas, decision.cause)
        if current != self._last:
            tags = {"application": ctx.app_name or "", "deployment": ctx.deployment_name, "cause": decision.cause}
            self._record_decision(tags)
            if decision.replicas != ctx.current_num_replicas:
                logger.info("%s: %d -> %d replicas (%s)", ctx.deployment_name, *current[:2], decision.detail)
        self._last = current
        return decision.replicas, {"last_reason": decision.detail, "cause": decision.cause}
