"""The ingress's side of the review queue: which answers are flagged `needs_review`, and
the records of flagged and audit-sampled answers sent to the ReviewQueue."""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from ray.serve.metrics import Counter

from deployments.api import Answer, ClassifyRequest, Ticket
from deployments.callers.group_commit import GroupCommit
from deployments.config_loop import ReviewConfig
from deployments.nodes.review_store import ItemKind
from policies.audit import should_audit
from policies.review import needs_review

if TYPE_CHECKING:
    from deployments.graph_nodes import Node

logger = logging.getLogger("ray.serve")


class ReviewRecorder:
    def __init__(self, config: ReviewConfig, queue: Node | None, rng: random.Random | None = None):
        """Without `queue` answers are still flagged, not recorded."""
        self._config = config
        self._rng = rng or random.Random()
        # Under load one hop carries the records of many tickets: a hop costs ~1 CPU-ms on
        # each side, more than the records it carries.
        self._records: GroupCommit[dict[str, Any], int] | None = (
            GroupCommit(lambda items: queue.record.remote(items), config.record_timeout_ms / 1000)
            if queue is not None
            else None
        )
        self._failures = Counter(
            "review_record_failures_total", description="Low-confidence answers the review queue did not record."
        )

    async def flag(self, body: ClassifyRequest, ticket: Ticket, result: Answer, request_id: str) -> bool:
        """Low-confidence model and edge answers are flagged; the first time (not from the
        result cache) they are also recorded for review, and a random `audit_share` of the
        answers not flagged is recorded as audit items. A failed record never fails the ticket."""
        c = self._config
        if not c.enabled:
            return False
        flagged = needs_review(result.label, result.confidence, result.route, c.min_confidence, result.review_threshold)
        if flagged and result.route != "cache":
            await self._record(body, ticket, result, request_id, "review")
        elif should_audit(result.route, flagged, c.audit_share, self._rng.random()):
            await self._record(body, ticket, result, request_id, "audit")
        return flagged

    async def _record(
        self, body: ClassifyRequest, ticket: Ticket, result: Answer, request_id: str, kind: ItemKind
    ) -> None:
        if self._records is None:
            return
        item = {
            "request_id": request_id,
            "ticket_id": body.ticket_id,
            "tenant": body.tenant,
            "user_id": body.user_id,
            "text": ticket.text,
            "lang": result.language,
            "label": result.label,
            "confidence": result.confidence,
            "route": result.route,
            "model_version": result.model_version,
            "kind": kind,
            "runners_up": [list(pair) for pair in result.runners_up],
        }
        try:
            await self._records.submit(item)
        except Exception as e:  # answered all the same; the count shows what the queue missed
            self._failures.inc()
            logger.warning("review record for request %s failed: %s", request_id, type(e).__name__)
