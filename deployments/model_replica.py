"""Model replica deployment: one vLLM engine, continuous batching inside it."""

from __future__ import annotations

import itertools
from typing import Any, Callable

from ray.serve.metrics import Gauge

from deployments.config import ModelReplicaConfig
from deployments.engines import EngineConfig, TicketEngine, TokenizerInfo, start_engine
from deployments.limiter import AdjustableLimit

DEFAULT_OPTIONS = {
    "name": "ModelReplica",
    # vLLM schedules its own batches; Serve only has to keep enough requests flowing
    # to it. Past this, callers get BackPressureError, which the ingress turns into 503.
    "max_ongoing_requests": 256,
    "max_queued_requests": 1024,
    "ray_actor_options": {"num_cpus": 1},
    "health_check_period_s": 10,
    "health_check_timeout_s": 30,
}


class ModelReplica:
    async def __init__(
        self,
        config: ModelReplicaConfig,
        engine_factory: Callable[[EngineConfig, str], TicketEngine] = start_engine,
    ):
        self._engine = engine_factory(config.engine, config.engine.model_dir)
        self._limit = AdjustableLimit(config.max_inflight_requests)
        # vLLM refuses two in-flight requests with one id; clients may reuse X-Request-ID.
        self._sequence = itertools.count()
        self._inflight = Gauge(
            "model_inflight_requests", description="Requests inside the engine right now."
        )
        self._batch_limit = Gauge(
            "model_batch_limit", description="Batch knob: most requests allowed inside the engine."
        )
        self._batch_limit.set(config.max_inflight_requests)

    async def predict(self, prompt: list[int] | str, request_id: str) -> dict[str, Any]:
        async with self._limit:
            self._inflight.set(self._limit.active)
            prediction = await self._engine.predict(prompt, f"{request_id}#{next(self._sequence)}")
        self._inflight.set(self._limit.active)
        return {
            "label": prediction.label,
            "confidence": prediction.confidence,
            "model_version": self._engine.metadata.version,
        }

    def tokenizer_info(self) -> TokenizerInfo:
        return self._engine.tokenizer_info()

    def labels(self) -> dict[str, Any]:
        meta = self._engine.metadata
        return {
            "model_version": meta.version,
            "labels": [{"name": label, "tier": meta.tiers.get(label, "regular")} for label in meta.labels],
        }

    async def set_max_inflight(self, limit: int) -> int:
        """The batch knob the adaptive batching policy turns."""
        await self._limit.set_limit(limit)
        self._batch_limit.set(limit)
        return limit

    def stats(self) -> dict[str, int]:
        return {"limit": self._limit.limit, "active": self._limit.active, "waiting": self._limit.waiting}

    async def ping(self) -> str:
        await self._engine.check_health()
        return "ok"

    async def check_health(self) -> None:
        await self._engine.check_health()

    def __del__(self):
        # Serve calls this on graceful shutdown; stopping the engine frees its worker
        # processes and KV memory at once instead of when the actor is reaped.
        if hasattr(self, "_engine"):
            self._engine.shutdown()
