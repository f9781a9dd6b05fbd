"""Model replica deployment: one vLLM engine, continuous batching inside it.

Around the engine sit the replica's own controls: the batch knob (how many requests
the engine holds at once) driven by the adaptive batching policy, a bounded wait in
front of it, memory reclaim, and the readings the shared breaker needs.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter, Gauge

from deployments.api import ModelOutOfMemory, ModelThrottled, ModelUnavailable
from deployments.config import FaultConfig, KVCacheConfig, ModelReplicaConfig
from deployments.engines import (
    Prediction,
    TicketEngine,
    TokenizerInfo,
    start_engine,
)
from deployments.kv_manager import PrefixUse
from deployments.limiter import AdjustableLimit
from deployments.resources import accelerator_memory_gib, read_resources
from models.artifacts import OUT_OF_SCOPE
from policies.batching import AdaptiveBatchSize, BatchDecision, BatchSignals, batch_cap
from policies.reclaim import ReclaimDecision, ReclaimMonitor
from policies.window import LatencyWindow

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "ModelReplica",
    # vLLM schedules its own batches; Serve only has to keep enough requests flowing
    # to it. Past this, callers get BackPressureError (the retry matrix's 429 row).
    "max_ongoing_requests": 256,
    "max_queued_requests": 1024,
    "ray_actor_options": {"num_cpus": 1},
    "health_check_period_s": 10,
    "health_check_timeout_s": 30,
}


def _failure(e: Exception) -> type[Exception]:
    if isinstance(e, (ModelOutOfMemory, MemoryError)) or type(e).__name__ == "OutOfMemoryError":
        return ModelOutOfMemory
    return ModelUnavailable


class ModelReplica:
    async def __init__(
        self,
        config: ModelReplicaConfig,
        breaker: DeploymentHandle | None = None,
        kv_manager: DeploymentHandle | None = None,
        kv_cache: KVCacheConfig | None = None,
    ):
        self._config = config
        self._breaker = breaker
        self._clock = time.monotonic
        self._faults = config.faults
        self._random = random.Random(0)
        # The engine class follows config.engine.mode (vLLM's, or the fake for graph tests).
        self._engine = start_engine(config.engine, config.engine.model_dir)
        now = self._clock()
        cap = batch_cap(config.batching, accelerator_memory_gib(), self._engine.batch_capacity())
        self._batching = AdaptiveBatchSize(config.batching, cap, now)
        self._limit = AdjustableLimit(self._batching.size)
        self._reclaim = ReclaimMonitor(config.reclaim)
        self._latency = LatencyWindow(config.batching.window_s)
        self._restart_reason: str | None = None
        self._source = serve.get_replica_context().replica_id.unique_id
        # vLLM refuses two in-flight requests with one id; clients may reuse X-Request-ID.
        self._sequence = itertools.count()
        self._inflight = Gauge("model_inflight_requests", description="Requests inside the engine right now.")
        self._waiting = Gauge(
            "model_waiting_requests", description="Requests waiting for a batch slot in front of the engine."
        )
        self._info = Gauge(
            "model_info", description="1 for the model version this replica serves.", tag_keys=("model_version",)
        )
        self._batch_limit = Gauge(
            "model_batch_limit", description="Batch knob: most requests allowed inside the engine."
        )
        self._efficiency = Gauge(
            "model_batch_efficiency", description="Filled batch slots / batch knob, sampled each control interval."
        )
        self._memory = Gauge("model_memory_pressure", description="Device (CPU: host RAM) memory in use, 0..1.")
        self._outcomes = Counter(
            "model_requests_total",
            description="Engine calls by outcome: ok, throttled, unavailable, out_of_memory.",
            tag_keys=("outcome",),
        )
        self._changes = Counter(
            "model_batch_changes_total", description="Batch knob changes by reason.", tag_keys=("reason",)
        )
        self._reclaims = Counter(
            "model_reclaim_actions_total",
            description="Memory reclaim actions by action and trigger.",
            tag_keys=("action", "trigger"),
        )
        self._batch_limit.set(self._batching.size)
        self._info.set(1, tags={"model_version": self._engine.metadata.version})
        self._control = asyncio.get_running_loop().create_task(self._control_loop())
        self._kv = None
        if kv_manager is not None:
            self._kv = KVReporter(kv_manager, kv_cache or KVCacheConfig(), self._engine, self._source)
            await self._kv.start()

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> dict[str, Any]:
        if self._restart_reason:
            raise ModelUnavailable(f"replica waits for a restart: {self._restart_reason}")
        bound = self._config.queue_per_slot
        if bound is not None and self._limit.waiting >= self._limit.limit * bound:
            self._outcomes.inc(tags={"outcome": "throttled"})
            raise ModelThrottled(f"{self._limit.waiting} requests already wait for {self._limit.limit} batch slots")
        start = self._clock()
        try:
            async with self._limit:
                self._inflight.set(self._limit.active)
                admitted = self._clock()
                await self._inject_fault()
                prediction = await self._engine.predict(prompt, f"{request_id}#{next(self._sequence)}", tenant)
        except Exception as e:
            kind = _failure(e)
            self._reclaim.record(True, kind is ModelOutOfMemory, (self._clock() - start) * 1000)
            self._outcomes.inc(tags={"outcome": "out_of_memory" if kind is ModelOutOfMemory else "unavailable"})
            if not isinstance(e, kind):
                logger.warning("engine call %s failed: %s", request_id, type(e).__name__)
            raise kind(type(e).__name__) from None
        finally:
            self._inflight.set(self._limit.active)
        done = self._clock()
        self._reclaim.record(False, False, (done - start) * 1000)
        # The batch policy judges the time inside the engine, which the batch size sets;
        # the wait for a slot in front of it would only grow if the batch shrank.
        self._latency.add((done - admitted) * 1000, done)
        self._outcomes.inc(tags={"outcome": "ok"})
        if self._kv is not None:
            self._kv.record(prediction)
        return {
            "label": prediction.label,
            "confidence": prediction.confidence,
            "model_version": self._engine.metadata.version,
        }

    async def _inject_fault(self) -> None:
        f = self._faults
        if f.failure == "none" or self._random.random() >= f.rate:
            return
        if f.failure == "slow":
            await asyncio.sleep(f.slow_ms / 1000)
        elif f.failure == "out_of_memory":
            raise ModelOutOfMemory("injected fault")
        else:
            raise ModelUnavailable("injected fault")

    def set_faults(self, faults: dict[str, Any]) -> dict[str, Any]:
        """Test switch: make this replica fail (see FaultConfig); {} turns it off."""
        self._faults = FaultConfig.model_validate(faults)
        return self._faults.model_dump()

    async def _control_loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.batching.interval_s)
            try:
                await self._control_step()
            except Exception:  # the loop must outlive one bad reading
                logger.exception("model replica control step failed")

    async def _control_step(self) -> None:
        now = self._clock()
        readings = read_resources()
        pressure = (readings.memory_percent or 0.0) / 100
        self._memory.set(pressure)
        self._efficiency.set(self._limit.active / self._limit.limit)
        self._waiting.set(self._limit.waiting)
        decision = self._batching.decide(
            BatchSignals(pressure, self._latency.p95_ms(now), self._latency.rate_per_s(now)), now
        )
        await self._apply(decision)
        if reclaim := self._reclaim.decide(now):
            await self._act(reclaim, now)
        if self._breaker is not None:
            # Fire and forget: a slow or lost breaker must not stall the control loop.
            self._breaker.report_resources.remote(self._source, readings)

    async def _apply(self, decision: BatchDecision) -> None:
        if decision.size == self._limit.limit:
            return
        logger.info("batch knob %d -> %d (%s)", self._limit.limit, decision.size, decision.reason)
        await self._limit.set_limit(decision.size)
        self._batch_limit.set(decision.size)
        self._changes.inc(tags={"reason": decision.reason})

    async def _act(self, reclaim: ReclaimDecision, now: float) -> None:
        logger.warning("memory reclaim: %s after %s", reclaim.action, reclaim.trigger)
        self._reclaims.inc(tags={"action": reclaim.action, "trigger": reclaim.trigger})
        if reclaim.action == "shrink_batch":
            await self._apply(self._batching.force(self._limit.limit // 2, now))
        elif reclaim.action == "free_caches":
            await self._engine.free_caches()
        else:
            # Serve replaces a replica whose health check fails: a fresh process, a fresh engine.
            self._restart_reason = f"reclaim after {reclaim.trigger}"

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Custom metrics for deployments.autoscaling.QueueLatencyPolicy."""
        return {"p95_ms": self._latency.p95_ms(self._clock()) or 0.0}

    def tokenizer_info(self) -> TokenizerInfo:
        return self._engine.tokenizer_info()

    def labels(self) -> dict[str, Any]:
        meta = self._engine.metadata
        return {
            "model_version": meta.version,
            "labels": [{"name": label, "tier": meta.tiers.get(label, "regular")} for label in meta.labels],
            "reserved": [label for label in meta.labels if label == OUT_OF_SCOPE],
            "review_threshold": meta.review_threshold,
            "edge_min_confidence": meta.edge_min_confidence,
        }

    async def set_max_inflight(self, limit: int) -> int:
        """Operator override of the batch knob (the policy goes on from there)."""
        await self._apply(self._batching.override(limit, self._clock()))
        return self._limit.limit

    def stats(self) -> dict[str, Any]:
        return {
            "limit": self._limit.limit,
            "active": self._limit.active,
            "waiting": self._limit.waiting,
            "batch_cap": self._batching.cap,
            "restart_reason": self._restart_reason,
        }

    async def ping(self) -> str:
        await self.check_health()
        return "ok"

    async def check_health(self) -> None:
        if self._restart_reason:
            raise RuntimeError(f"restart requested: {self._restart_reason}")
        await self._engine.check_health()

    def __del__(self):
        # Serve calls this on graceful shutdown; stopping the engine frees its worker
        # processes and KV memory at once instead of when the actor is reaped.
        if hasattr(self, "_control"):
            self._control.cancel()
        if getattr(self, "_kv", None) is not None:
            self._kv.stop()
        if hasattr(self, "_engine"):
            self._engine.shutdown()


# A report is off the request path; a manager slower than this counts as gone for one interval.
KV_REPORT_TIMEOUT_S = 5.0


class KVReporter:
    """The replica's side of the KV-cache manager: join with its prefixes and cache size,
    compute the hot prefixes it is told to before taking traffic, then send what its
    requests put in the cache, one call per interval (also when idle), off the request path."""

    def __init__(self, manager: DeploymentHandle, config: KVCacheConfig, engine: TicketEngine, replica: str):
        self._manager = manager
        self._config = config
        self._engine = engine
        self._replica = replica
        self._prefixes = engine.prefixes()
        blocks, block_tokens = engine.kv_cache()
        self._capacity_tokens = blocks * block_tokens
        # vLLM caches whole blocks only: a hit is every full block of the prefix served.
        self._full_tokens = {k: len(ids) // block_tokens * block_tokens for k, ids in self._prefixes.items()}
        self._uses: list[PrefixUse] = []
        self._warmed: list[str] = []
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self._join(), self._config.warmup_timeout_s)
        except Exception as e:  # no manager, or a slow warm-up: serve cold rather than not at all
            logger.warning("KV-cache manager join/warm-up incomplete: %s", type(e).__name__)
        self._task = asyncio.get_running_loop().create_task(self._report_loop())

    async def _join(self) -> None:
        keys = await self._manager.join.remote(self._replica, self._prefixes, self._capacity_tokens)
        for key in keys:
            if key in self._prefixes:
                await self._engine.warm(self._prefixes[key], f"warmup-{key}-{self._replica}")
                self._warmed.append(key)
        if keys:
            logger.info("warmed %d hot prefixes: %s", len(self._warmed), ", ".join(self._warmed))

    def record(self, p: Prediction) -> None:
        if p.prefix_key is None or p.prefix_key not in self._full_tokens:
            return
        hit = 0 < self._full_tokens[p.prefix_key] <= p.cached_tokens
        self._uses.append(PrefixUse(p.prefix_key, hit, p.prompt_tokens, p.cached_tokens, p.ttft_ms))

    async def _report_loop(self) -> None:
        while True:
            # Sent even without uses: a manager back from a restart learns an idle replica
            # within one interval instead of at its next ticket.
            await asyncio.sleep(self._config.report_interval_ms / 1000)
            uses, warmed, self._uses, self._warmed = self._uses, self._warmed, [], []
            try:
                known = await asyncio.wait_for(
                    self._manager.report.remote(self._replica, uses, warmed), KV_REPORT_TIMEOUT_S
                )
                if not known:  # the manager restarted: tell it again what this replica is
                    await self._manager.join.remote(self._replica, self._prefixes, self._capacity_tokens)
                    await self._manager.report.remote(self._replica, uses, warmed)
            except Exception as e:  # the registry misses one interval; routing falls back meanwhile
                logger.info("KV-cache manager report dropped (%d uses): %s", len(uses), type(e).__name__)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
