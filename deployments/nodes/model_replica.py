"""Model replica deployment: one vLLM engine, continuous batching inside it. Its controls
(batch knob, memory reclaim) are deployments/control/replica_controls.py; its KV-cache manager
reports, deployments/nodes/kv_reporter.py."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.api import ModelAnswer, ModelFailure, ModelOutOfMemory, ModelThrottled, ModelUnavailable
from deployments.config import FaultConfig, KVCacheConfig, ModelReplicaConfig
from deployments.control.replica_controls import ReplicaControls
from deployments.engines import TokenizerInfo, start_engine
from deployments.metrics.held_gauge import HeldGauge
from deployments.nodes.faults import FaultInjector
from deployments.nodes.kv_reporter import KVReporter
from models.artifacts import OUT_OF_SCOPE
from models.registry import target

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "ModelReplica",
    # vLLM schedules its own batches; Serve only has to keep enough requests flowing
    # to it. Past this, callers get BackPressureError (the retry matrix's 429 row).
    "max_ongoing_requests": 256,
    "max_queued_requests": 1024,
    "ray_actor_options": {"num_cpus": 1},
    # An upgrade starts one new replica (rounded up) before an old one stops, so the engine's
    # start is no gap: it needs room for one more replica (docs/reliability.md).
    "max_surge_percent": 25,
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
        # Wall clock: a drill lines the replica's start up with its own deploy call.
        self._init_started_unix_s = time.time()
        self._config = config
        self._clock = time.monotonic
        self._faults = FaultInjector(config.faults)
        # The engine class follows config.engine.mode (vLLM's, or the fake for graph tests).
        # Where the model directory pointed when the engine loaded it (an alias moves).
        self._loaded = target(config.engine.model_dir)
        started = self._clock()
        self._engine = start_engine(config.engine, config.engine.model_dir)
        self._engine_start_ms = round((self._clock() - started) * 1000, 1)
        self._source = serve.get_replica_context().replica_id.unique_id
        # Before Serve marks the replica ready, so no ticket waits for it.
        started = self._clock()
        warmed = await self._engine.warm_up(f"warm-up-{self._source}")
        self._warm_up_ms = round((self._clock() - started) * 1000, 1) if warmed else None
        self._controls = ReplicaControls(config, self._engine, breaker, self._source, self._clock)
        # vLLM refuses two in-flight requests with one id; clients may reuse X-Request-ID.
        self._sequence = itertools.count()
        self._inflight = HeldGauge("model_inflight_requests", description="Requests inside the engine right now.")
        self._info = HeldGauge(
            "model_info", description="1 for the model version this replica serves.", tag_keys=("model_version",)
        )
        self._outcomes = Counter(
            "model_requests_total",
            description="Engine calls by outcome: ok, throttled, unavailable, out_of_memory.",
            tag_keys=("outcome",),
        )
        self._info.set(1, tags={"model_version": self._engine.metadata.version})
        self._kv = None
        if kv_manager is not None:
            self._kv = KVReporter(kv_manager, kv_cache or KVCacheConfig(), self._engine, self._source)
            await self._kv.start()

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> ModelAnswer:
        controls, slots = self._controls, self._controls.slots
        if controls.restart_reason:
            raise ModelUnavailable(f"replica waits for a restart: {controls.restart_reason}")
        bound = self._config.queue_per_slot
        if bound is not None and slots.waiting >= slots.limit * bound:
            self._outcomes.inc(tags={"outcome": "throttled"})
            controls.throttled.add(self._clock())
            raise ModelThrottled(f"{slots.waiting} requests already wait for {slots.limit} batch slots")
        start = self._clock()
        try:
            async with slots:
                self._inflight.set(slots.active)
                admitted = self._clock()
                await self._faults.maybe_fail()
                prediction = await self._engine.predict(prompt, f"{request_id}#{next(self._sequence)}", tenant)
        except Exception as e:
            kind = _failure(e)
            controls.reclaim.record(True, kind is ModelOutOfMemory, (self._clock() - start) * 1000)
            self._outcomes.inc(tags={"outcome": "out_of_memory" if kind is ModelOutOfMemory else "unavailable"})
            if not isinstance(e, kind):
                logger.warning("engine call %s failed: %s", request_id, type(e).__name__)
            raise kind(type(e).__name__) from None
        finally:
            self._inflight.set(slots.active)
        done = self._clock()
        controls.reclaim.record(False, False, (done - start) * 1000)
        # The batch policy judges the time inside the engine, which the batch size sets;
        # the wait for a slot in front of it would only grow if the batch shrank.
        controls.latency.add((done - admitted) * 1000, done)
        controls.stay.add((done - start) * 1000, done)
        self._outcomes.inc(tags={"outcome": "ok"})
        if self._kv is not None:
            self._kv.record(prediction)
        meta = self._engine.metadata
        return ModelAnswer(
            prediction.label,
            prediction.confidence,
            meta.version,
            review_threshold=meta.review_threshold,
            runners_up=prediction.runners_up,
        )

    async def predict_many(
        self, prompts: list[list[int] | str], request_ids: list[str], tenant: str | None = None
    ) -> list[ModelAnswer | ModelFailure]:
        """The tickets one caller held, in one call (deployments/callers/call_batcher.py): Serve's
        per-call cost is paid once. Each ticket is admitted, answered and counted on its
        own, and a failure stays that ticket's."""
        results = await asyncio.gather(
            *(self.predict(p, r, tenant) for p, r in zip(prompts, request_ids, strict=True)), return_exceptions=True
        )
        return [r if isinstance(r, ModelAnswer) else ModelFailure.of(r) for r in results]

    def set_faults(self, faults: dict[str, Any]) -> dict[str, Any]:
        """Test switch: make this replica fail (see FaultConfig); {} turns it off."""
        self._faults.config = FaultConfig.model_validate(faults)
        return self._faults.config.model_dump()

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Custom metrics for deployments.control.autoscaling.QueueLatencyPolicy."""
        # The engine's own time: the queue in front of it is the queue signal's, and a call's
        # whole stay put the latency signal over its target on micro-batched waits alone.
        return {"p95_ms": self._controls.engine_p95_ms() or 0.0, "throttled_per_s": self._controls.throttled_per_s()}

    def tokenizer_info(self) -> TokenizerInfo:
        return self._engine.tokenizer_info()

    def labels(self) -> dict[str, Any]:
        meta = self._engine.metadata
        return {
            "model_version": meta.version,
            "labels": [
                {"name": label, "tier": tier, **meta.taxonomy.get("labels", {}).get(label, {})}
                for label, tier in meta.label_tiers().items()
            ],
            "boundaries": meta.taxonomy.get("boundaries", []),
            "reserved": [label for label in meta.labels if label == OUT_OF_SCOPE],
            "review_threshold": meta.review_threshold,
            "edge_min_confidence": meta.edge_min_confidence,
        }

    async def set_max_inflight(self, limit: int) -> int:
        """Operator override of the batch knob (the policy goes on from there)."""
        return await self._controls.override(limit)

    def stats(self) -> dict[str, Any]:
        slots = self._controls.slots
        return {
            "limit": slots.limit,
            "start_limit": self._controls.batching.start,
            "active": slots.active,
            "waiting": slots.waiting,
            "batch_cap": self._controls.batching.cap,
            "restart_reason": self._controls.restart_reason,
            "engine_p95_ms": self._controls.engine_p95_ms(),
            "stay_p95_ms": self._controls.stay_p95_ms(),
            "init_started_unix_s": self._init_started_unix_s,
            "engine_start_ms": self._engine_start_ms,
            "warm_up_ms": self._warm_up_ms,
        }

    async def ping(self) -> str:
        await self._check_engine()
        return "ok"

    async def check_health(self) -> None:
        """Serve's health check. A model directory that is an alias (models/registry.py) and
        now names another model fails it: Serve replaces this replica with one that loads
        the new model, while this one answers with the old until then."""
        if (now := target(self._config.engine.model_dir)) != self._loaded:
            raise RuntimeError(f"{self._config.engine.model_dir} now names {now}: restart to load it")
        await self._check_engine()

    async def _check_engine(self) -> None:
        if self._controls.restart_reason:
            raise RuntimeError(f"restart requested: {self._controls.restart_reason}")
        await self._engine.check_health()

    def shutdown(self) -> None:
        """Stops the engine, its control loop and KV reports; once (colocated, the ingress
        that holds this replica calls it, and then garbage collection does)."""
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        if hasattr(self, "_controls"):
            self._controls.stop()
        if (kv := getattr(self, "_kv", None)) is not None:
            kv.stop()
        if hasattr(self, "_engine"):
            self._engine.shutdown()

    def __del__(self):
        # Serve calls this on graceful shutdown; stopping the engine frees its worker
        # processes and KV memory at once instead of when the actor is reaped.
        self.shutdown()
