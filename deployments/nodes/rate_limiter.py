"""The graph's one holder of per-user admission state (token buckets, duplicate windows).

A single replica sees every request of every user, so limits hold however many
ingress and anti-spam replicas run. It answers from memory in microseconds; what it
costs is a hop, which the anti-spam replicas share among concurrent tickets by sending
their admissions in batches. Losing it resets the buckets (users get a fresh
burst) and, meanwhile, the anti-spam replicas admit rather than fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ray.serve.metrics import Counter

from deployments.config import AntiSpamConfig
from deployments.metrics.held_gauge import HeldGauge
from deployments.metrics.metric_tags import tag_keys
from policies.rate_limit import Admission, UserLimits

DEFAULT_OPTIONS = {
    "name": "RateLimiter",
    "num_replicas": 1,
    "max_ongoing_requests": 4096,
    "ray_actor_options": {"num_cpus": 0},
}


class RateLimiter:
    def __init__(self, config: AntiSpamConfig, clock: Callable[[], float] = time.monotonic):
        self._limits = UserLimits(config.rate_limit, config.duplicates)
        self._clock = clock
        self._refused = Counter(
            "rate_limiter_refusals_total",
            description="Requests refused by per-user admission, by rule (rate_limited, duplicate) and tier.",
            tag_keys=tag_keys("rule", "tier"),
        )
        self._users = HeldGauge("rate_limiter_tracked_users", description="Users with live admission state.")

    def admit_many(self, requests: list[tuple[str, str, str, str | None]]) -> list[Admission]:
        """(user key, tier, text digest, tenant) for each ticket, in arrival order."""
        now = self._clock()
        admissions = [self._limits.admit(key, tier, digest, now, tenant) for key, tier, digest, tenant in requests]
        for (_, tier, _, _), admission in zip(requests, admissions):
            if admission.rule:
                self._refused.inc(tags={"rule": admission.rule, "tier": tier})
        self._users.set(self._limits.tracked_users())
        return admissions

    def stats(self) -> dict[str, int]:
        return {"tracked_users": self._limits.tracked_users()}

    async def ping(self) -> str:
        return "ok"
