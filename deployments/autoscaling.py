"""Ray Serve custom autoscaling policy for the model replica and the edge tier.

Serve calls it with an AutoscalingContext; the decision itself is policies.autoscale.
`p95_ms` comes from the replicas' `record_autoscaling_stats` (ModelReplica has it);
deployments without it scale on queue depth alone. Serve applies min/max replicas and
its upscale/downscale delays on top. Where a custom policy cannot be used, delete the
`policy` key and Serve's built-in policy uses `target_ongoing_requests` instead.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.serve.config import AutoscalingContext

from policies.autoscale import AutoscaleConfig, ScaleSignals, desired_replicas

logger = logging.getLogger("ray.serve")


class QueueLatencyPolicy:
    def __init__(self, **kwargs: Any):
        self._config = AutoscaleConfig(**kwargs)

    def __call__(self, ctx: AutoscalingContext) -> tuple[int, dict[str, Any]]:
        p95 = (ctx.aggregated_metrics or {}).get("p95_ms") or {}
        signals = ScaleSignals(
            replicas=ctx.current_num_replicas,
            ongoing_requests=ctx.total_num_requests,
            p95_ms=max(p95.values()) if p95 else None,
        )
        replicas, reason = desired_replicas(self._config, signals)
        if replicas != ctx.current_num_replicas:
            logger.info("%s: %d -> %d replicas (%s)", ctx.deployment_name, ctx.current_num_replicas, replicas, reason)
        return replicas, {"last_reason": reason}
