"""Anti-spam filter: content rules here, per-user limits in the RateLimiter actor."""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Callable

from ray.exceptions import RayActorError
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.api import Answer, Refusal, Ticket
from deployments.callers.group_commit import GroupCommit
from deployments.config import AntiSpamConfig
from policies.rate_limit import Admission, UserLimits, text_digest, user_key
from policies.screening import screen_locally
from policies.spam import LetterPairs, SpamRules

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "AntiSpam",
    "max_ongoing_requests": 1024,
    # Past this the caller gets BackPressureError, which the ingress answers as 503
    # overloaded with Retry-After: a bounded queue instead of a growing one.
    "max_queued_requests": 2048,
    "ray_actor_options": {"num_cpus": 0},
    "max_surge_percent": 100,  # an upgrade starts the new replicas before the old ones stop
}


def load_letter_pairs(path: str) -> LetterPairs:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        if "text" not in (reader.fieldnames or []):
            raise ValueError(f"{path}: needs a 'text' column, has {reader.fieldnames}")
        return LetterPairs([row["text"] for row in reader])


class AntiSpam:
    """Content rules run in each replica: their thresholds adapt to the traffic this
    replica sees, a fair sample of all traffic, so no state needs sharing."""

    def __init__(
        self,
        config: AntiSpamConfig,
        limiter: DeploymentHandle,
        next_node: DeploymentHandle,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._config = config
        self._clock = clock
        # What this replica alone has seen: a lower bound of every user's use, so its
        # refusals are always right, and they cost no hop. Under a flood the flooder is
        # refused here, also when the limiter, starved, answers too late.
        self._local = UserLimits(config.rate_limit, config.duplicates)
        self._rules = SpamRules(config.rules, load_letter_pairs(config.reference_texts_file))
        # Rate-limit decisions go to the limiter together: one hop carries many tickets.
        self._admissions: GroupCommit[tuple[str, str, str, str | None], Admission] = GroupCommit(
            lambda batch: limiter.admit_many.remote(batch), config.limiter_timeout_ms / 1000
        )
        self._next = next_node
        self._blocked = Counter(
            "antispam_blocked_total",
            description="Tickets refused by the anti-spam filter, by rule.",
            tag_keys=("rule",),
        )
        self._limiter_unavailable = Counter(
            "antispam_limiter_unavailable_total",
            description="Tickets admitted without a rate-limit decision (actor slow or down).",
        )
        self._next_replica_lost = Counter(
            "antispam_next_replica_lost_total",
            description="Tickets asked again because the edge-router replica holding them died.",
        )

    async def classify(self, ticket: Ticket) -> Answer | Refusal:
        refusal = await self._screen(ticket)
        if refusal is not None:
            return refusal
        try:
            return await self._next.classify.remote(ticket)
        except RayActorError:
            # The replica died holding the ticket. Serve drops a dead replica from its
            # router at the first such error, so asking again reaches a live one; a
            # classification is safe to ask twice.
            self._next_replica_lost.inc()
            return await self._next.classify.remote(ticket)

    async def _screen(self, ticket: Ticket) -> Refusal | None:
        """Cheapest check first: this replica's own count (a flood is refused before its
        texts cost the content rules any CPU), the content rules (spam costs no limiter
        hop), then the shared rate limiter."""
        rate = self._config.rate_limit
        tier = rate.tier_of(ticket.user_id, ticket.tier_header)
        key = user_key(ticket.user_id, ticket.tenant, ticket.client)
        digest = text_digest(ticket.text)
        admission, rule = screen_locally(
            self._local, self._rules, ticket.text, key, tier, digest, self._clock(), ticket.tenant
        )
        if admission.rule is None:
            if rule is not None:
                self._blocked.inc(tags={"rule": rule})
                return Refusal(422, "spam_detected", f"refused by anti-spam rule {rule}")
            try:
                admission = await self._admissions.submit((key, tier, digest, ticket.tenant))
            except Exception as e:  # slow or lost limiter: this replica's own count decides
                self._limiter_unavailable.inc()
                logger.warning(
                    "rate limiter unavailable (%s); request %s admitted by this replica's count",
                    type(e).__name__,
                    ticket.request_id,
                )
                return None
        if admission.rule == "rate_limited":
            self._blocked.inc(tags={"rule": "rate_limited"})
            return Refusal(
                429, "rate_limited", f"too many requests for tier {tier}; retry later", admission.retry_after_s
            )
        if admission.rule == "duplicate":
            self._blocked.inc(tags={"rule": "duplicate"})
            return Refusal(422, "spam_detected", "refused by anti-spam rule duplicate: the same text too often")
        return None

    def thresholds(self) -> dict[str, float]:
        return self._rules.thresholds()

    async def ping(self) -> str:
        return "ok"
