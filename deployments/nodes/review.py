"""The review queue: `ReviewQueue` is the one deployment that owns the review store
(deployments/nodes/review_store.py): it records the answers the model was unsure of and the
audit samples, serves the admin API's reads and people's actions, reports the queue's
gauges and deletes items past their retention period.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable
from typing import Any

from ray.serve.metrics import Counter

from deployments.config_loop import ReviewConfig
from deployments.metrics.held_gauge import HeldGauge
from deployments.nodes.review_store import ITEM_KINDS, ItemKind, Proposal, ProposalStatus, ReviewStore, utc_now
from policies.audit import AuditEstimate

DEFAULT_OPTIONS = {
    "name": "ReviewQueue",
    "num_replicas": 1,
    "max_ongoing_requests": 1024,
    "ray_actor_options": {"num_cpus": 0},
}

EXPIRE_EVERY = datetime.timedelta(hours=1)
logger = logging.getLogger("ray.serve")


class ReviewQueue:
    def __init__(
        self,
        config: ReviewConfig,
        store: Callable[[str], ReviewStore] = ReviewStore,
        clock: Callable[[], datetime.datetime] = utc_now,
    ):
        self._store = store(config.store_path)
        self._retention_days = config.retention_days
        self._report_interval_s = config.report_interval_s
        self._clock = clock
        self._recorded = Counter("review_items_recorded_total", description="Answers recorded for review.")
        self._resolved = Counter(
            "review_items_resolved_total",
            description="Review items a person resolved, by kind (review: flagged; audit: sampled).",
            tag_keys=("kind",),
        )
        self._open = HeldGauge(
            "review_open_items", description="Review items not resolved yet, by kind.", tag_keys=("kind",)
        )
        self._oldest = HeldGauge(
            "review_oldest_open_age_s",
            description="Age of the oldest open review item, by kind (0: none open).",
            tag_keys=("kind",),
        )
        self._audit_share = HeldGauge(
            "review_audit_wrong_share",
            description="Share of audited answers people found wrong: the estimate of the silent error rate and "
            "its 95 % Wilson bounds (bound: estimate, low, high); absent until one is checked.",
            tag_keys=("bound",),
        )
        self._open_counts: dict[str, int]  # open items by kind, as the gauge shows them
        self._expire()
        self._loop = asyncio.get_running_loop().create_task(self._report_loop())

    def _expire(self) -> None:
        self._store.expire(self._retention_days)
        self._expired_at = self._clock()
        self._report()

    def _report_open(self) -> None:
        counts = self._store.counts()
        self._open_counts = {kind: counts[f"open_{kind}"] for kind in ITEM_KINDS}
        self._show_open()

    def _show_open(self) -> None:
        for kind, count in self._open_counts.items():
            self._open.set(count, tags={"kind": kind})

    def _report(self) -> None:
        """The queue's gauges from the store, as of now."""
        self._report_open()
        oldest, now = self._store.oldest_open(), self._clock()
        for kind in ITEM_KINDS:
            age = (now - oldest[kind]).total_seconds() if kind in oldest else 0.0
            self._oldest.set(max(0.0, age), tags={"kind": kind})
        audit = self._store.audit()
        if audit.wrong_share is not None and audit.interval95 is not None:
            bounds = {"estimate": audit.wrong_share, "low": audit.interval95[0], "high": audit.interval95[1]}
            for bound, value in bounds.items():
                self._audit_share.set(value, tags={"bound": bound})

    async def _report_loop(self) -> None:
        # Ages grow while nothing is written, and old items expire without a write.
        while True:
            await asyncio.sleep(self._report_interval_s)
            try:
                if self._clock() - self._expired_at >= EXPIRE_EVERY:
                    self._expire()
                else:
                    self._report()
            except Exception:  # a locked or full disk: try again next round
                logger.exception("review queue report failed")

    async def record(self, items: list[dict[str, Any]]) -> list[int]:
        ids = self._store.add(items)
        if ids:
            self._recorded.inc(len(ids))
        # Every flagged ticket comes through here: the open counts follow at once, counted
        # here (counting the store scans it whole, and it grows to retention_days of
        # items); the exact counts, the oldest age and the audit estimate, on the report
        # loop and after every other change.
        for item in items:
            self._open_counts[item.get("kind", "review")] += 1
        self._show_open()
        return ids

    async def erase(self, tenant: str | None, user_id: str | None) -> int:
        erased = self._store.erase(tenant, user_id)
        self._report()
        return erased

    async def items(self, status: str, limit: int, offset: int, kind: ItemKind | None = None) -> list[dict[str, Any]]:
        return self._store.items(status, limit, offset, kind)

    async def audit(self) -> AuditEstimate:
        return self._store.audit()

    async def resolve(self, item_id: int, label: str) -> dict[str, Any] | None:
        item = self._store.resolve(item_id, label)
        if item is not None:
            self._resolved.inc(tags={"kind": item["kind"]})
        self._report()
        return item

    async def counts(self) -> dict[str, int]:
        return self._store.counts()

    async def propose(self, item_id: int, name: str, description: str) -> dict[str, Any] | None:
        item = self._store.propose(item_id, name, description)
        self._report()
        return item

    async def proposals(self, status: ProposalStatus | None = None) -> list[Proposal]:
        return self._store.proposals(status)

    async def decide(self, name: str, accept: bool) -> Proposal | None:
        proposal = self._store.decide(name, accept)
        self._report()
        return proposal

    async def training_rows(self) -> list[dict[str, str]]:
        return self._store.training_rows()

    async def ping(self) -> str:
        return "ok"
