"""A model replica's controls around its engine: the batch knob (how many requests the
engine holds at once) driven by the adaptive batching policy, the bounded wait in front
of it, memory reclaim, and the readings the shared breaker needs, on a loop of their own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.config import ModelReplicaConfig
from deployments.control.batch_slots import AdjustableLimit
from deployments.engines import TicketEngine
from deployments.engines.device_readings import accelerator_memory_gib, read_resources
from deployments.metrics.held_gauge import HeldGauge
from deployments.metrics.metric_tags import tag_keys
from policies.batching import AdaptiveBatchSize, BatchDecision, BatchSignals, batch_cap
from policies.reclaim import ReclaimDecision, ReclaimMonitor
from policies.window import EventRate, LatencyWindow

logger = logging.getLogger("ray.serve")


class ReplicaControls:
    def __init__(
        self,
        config: ModelReplicaConfig,
        engine: TicketEngine,
        breaker: DeploymentHandle | None,
        replica: str,
        clock: Callable[[], float],
    ):
        """`breaker` gets this replica's resource readings (as `replica`) each interval."""
        self._config = config
        self._engine = engine
        self._breaker = breaker
        self._replica = replica
        self._clock = clock
        now = clock()
        cap = batch_cap(config.batching, accelerator_memory_gib(), engine.batch_capacity())
        self.batching = AdaptiveBatchSize(config.batching, cap, now)
        self.slots = AdjustableLimit(self.batching.size)
        self.reclaim = ReclaimMonitor(config.reclaim)
        self.latency = LatencyWindow(config.batching.window_s)
        self.stay = LatencyWindow(config.batching.window_s)  # a call's wait for a slot too
        self.throttled = EventRate(config.batching.window_s)
        self.restart_reason: str | None = None
        self._waiting = HeldGauge(
            "model_waiting_requests", description="Requests waiting for a batch slot in front of the engine."
        )
        self._batch_limit = HeldGauge(
            "model_batch_limit", description="Batch knob: most requests allowed inside the engine."
        )
        self._efficiency = HeldGauge(
            "model_batch_efficiency", description="Filled batch slots / batch knob, sampled each control interval."
        )
        self._memory = HeldGauge("model_memory_pressure", description="Device (CPU: host RAM) memory in use, 0..1.")
        self._changes = Counter(
            "model_batch_changes_total", description="Batch knob changes by reason.", tag_keys=("reason",)
        )
        self._reclaims = Counter(
            "model_reclaim_actions_total",
            description="Memory reclaim actions by action and trigger.",
            tag_keys=tag_keys("action", "trigger"),
        )
        self._batch_limit.set(self.batching.size)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def stop(self) -> None:
        self._task.cancel()

    def engine_p95_ms(self) -> float | None:
        return self.latency.p95_ms(self._clock())

    def stay_p95_ms(self) -> float | None:
        return self.stay.p95_ms(self._clock())

    def throttled_per_s(self) -> float:
        return self.throttled.per_s(self._clock())

    async def override(self, limit: int) -> int:
        """Operator override of the batch knob (the policy goes on from there)."""
        await self._apply(self.batching.override(limit, self._clock()))
        return self.slots.limit

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.batching.interval_s)
            try:
                await self._step()
            except Exception:  # the loop must outlive one bad reading
                logger.exception("model replica control step failed")

    async def _step(self) -> None:
        now = self._clock()
        readings = read_resources()
        pressure = (readings.memory_percent or 0.0) / 100
        self._memory.set(pressure)
        self._efficiency.set(self.slots.active / self.slots.limit)
        self._waiting.set(self.slots.waiting)
        decision = self.batching.decide(
            BatchSignals(pressure, self.latency.p95_ms(now), self.latency.rate_per_s(now)), now
        )
        await self._apply(decision)
        if reclaim := self.reclaim.decide(now):
            await self._act(reclaim, now)
        if self._breaker is not None:
            # Fire and forget: a slow or lost breaker must not stall the control loop.
            self._breaker.report_resources.remote(self._replica, readings)

    async def _apply(self, decision: BatchDecision) -> None:
        if decision.size == self.slots.limit:
            return
        logger.info("batch knob %d -> %d (%s)", self.slots.limit, decision.size, decision.reason)
        await self.slots.set_limit(decision.size)
        self._batch_limit.set(decision.size)
        self._changes.inc(tags={"reason": decision.reason})

    async def _act(self, reclaim: ReclaimDecision, now: float) -> None:
        logger.warning("memory reclaim: %s after %s", reclaim.action, reclaim.trigger)
        self._reclaims.inc(tags={"action": reclaim.action, "trigger": reclaim.trigger})
        if reclaim.action == "shrink_batch":
            await self._apply(self.batching.force(self.slots.limit // 2, now))
        elif reclaim.action == "free_caches":
            await self._engine.free_caches()
        else:
            # Serve replaces a replica whose health check fails: a fresh process, a fresh engine.
            self.restart_reason = f"reclaim after {reclaim.trigger}"
