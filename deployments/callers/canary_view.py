"""A caller's view of the canary controller (deployments/nodes/canary.py): its copy of the
split, and the figures it sends back."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from ray.serve.handle import DeploymentHandle

from policies.canary import COLORS, Side, side_for
from policies.rollout import Split, SyncReport


class CanaryView:
    """A caller's copy of the split, refreshed every `sync_interval_s` by a loop that also
    sends the caller's figures: a rollback or a cache flush reaches idle callers too.

    Without the controller every ticket goes to stable: an unjudged canary takes no
    customers. The cache epoch stays as last seen.
    """

    def __init__(
        self,
        controller: DeploymentHandle,
        sync_interval_s: float,
        timeout_s: float,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        self._controller = controller
        self._interval_s = sync_interval_s
        self._timeout_s = timeout_s
        self._sleep = sleep
        self.split = Split()
        self._report = SyncReport()
        self._loop: asyncio.Task | None = None
        self.unreachable = 0

    async def start(self) -> None:
        """The first split before the first ticket, then the loop."""
        await self.sync()
        self._loop = asyncio.get_running_loop().create_task(self._sync_loop())

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()

    def route(self, ticket_key: str, color: str | None) -> tuple[Side, bool]:
        """(side that answers, whether the canary also answers a shadow copy)."""
        if self.split.canary_version is None:
            return "stable", False
        if color in COLORS:
            return color, False  # type: ignore[return-value]
        if side_for(ticket_key, self.split.percent) == "stable":
            return "stable", False
        return ("stable", True) if self.split.shadow else ("canary", False)

    @property
    def canary_version(self) -> str | None:
        return self.split.canary_version

    @property
    def epoch(self) -> int:
        return self.split.epoch

    @property
    def cache_canary_answers(self) -> bool:
        return self.split.status != "rolled_back"

    def record(self, side: Side, latency_ms: float, failed: bool) -> None:
        if self.split.canary_version is None:
            return
        if failed:
            self._report.canary_errors += side == "canary"
        else:
            (self._report.canary_ms if side == "canary" else self._report.stable_ms).append(latency_ms)

    def record_shadow(self, agreed: bool) -> None:
        self._report.compared += 1
        self._report.agreed += agreed

    async def _sync_loop(self) -> None:
        while True:
            await self._sleep(self._interval_s)
            await self.sync()

    async def sync(self) -> None:
        report, self._report = dataclasses.replace(self._report, generation=self.split.generation), SyncReport()
        try:
            self.split = await asyncio.wait_for(self._controller.sync.remote(report), self._timeout_s)
        except Exception:
            self.unreachable += 1
            self.split = dataclasses.replace(self.split, percent=0.0, shadow=False)
