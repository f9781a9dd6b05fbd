"""One caller's calls into the model replicas, several tickets to a call once they pile
up (when: policies/micro_batch.py). Tickets go together only with tickets of the same
tenant, so prefix-affinity routing still sees one tenant per call; a ticket's failure is
raised to that ticket's caller alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Histogram

from deployments.api import ModelAnswer, ModelFailure
from policies.micro_batch import MicroBatchConfig, send_now


@dataclass
class _Waiting:
    prompt: list[int] | str
    request_id: str
    answer: asyncio.Future
    since: float


class CallBatcher:
    def __init__(
        self,
        model: DeploymentHandle,
        config: MicroBatchConfig,
        call_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`call_timeout_s` bounds a call's wait for the replica; the caller's own deadline
        per ticket stays its own (a ticket given up on leaves its call running)."""
        self._model = model
        self._config = config
        self._timeout_s = call_timeout_s
        self._clock = clock
        self._queues: dict[str | None, list[_Waiting]] = {}
        self._in_flight = 0
        self._timer: asyncio.TimerHandle | None = None
        self._calls: set[asyncio.Task] = set()  # held until done: the loop keeps weak references
        self.sent = {"calls": 0, "tickets": 0}
        self._sizes = Histogram(
            "model_call_tickets",
            description="Tickets per call into the model replicas (micro-batching).",
            boundaries=[1, 2, 4, 8, 16, 32, 64],
        )

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> ModelAnswer:
        answer = asyncio.get_running_loop().create_future()
        self._queues.setdefault(tenant, []).append(_Waiting(prompt, request_id, answer, self._clock()))
        self._pump()
        return await answer

    def _pump(self) -> None:
        now = self._clock()
        for tenant in list(self._queues):
            queue = [w for w in self._queues[tenant] if not w.answer.done()]  # drop the given up
            while send_now(self._config, len(queue), (now - queue[0].since) * 1000 if queue else 0, self._in_flight):
                batch, queue = queue[: self._config.max_batch_tickets], queue[self._config.max_batch_tickets :]
                self._send(tenant, batch)
            if queue:
                self._queues[tenant] = queue
            else:
                del self._queues[tenant]
        if self._queues and self._timer is None:
            oldest = min(queue[0].since for queue in self._queues.values())
            wait_s = max(0.0, oldest + self._config.max_wait_ms / 1000 - now)
            self._timer = asyncio.get_running_loop().call_later(wait_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()

    def _send(self, tenant: str | None, batch: list[_Waiting]) -> None:
        self._in_flight += 1
        self.sent["calls"] += 1
        self.sent["tickets"] += len(batch)
        self._sizes.observe(len(batch))
        call = asyncio.ensure_future(self._call(tenant, batch))
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)

    async def _call(self, tenant: str | None, batch: list[_Waiting]) -> None:
        try:
            results = await asyncio.wait_for(
                self._model.predict_many.remote(
                    [w.prompt for w in batch], [w.request_id for w in batch], tenant=tenant
                ),
                self._timeout_s,
            )
        except Exception as e:
            results = [e] * len(batch)
        finally:
            self._in_flight -= 1
        for waiting, result in zip(batch, results, strict=True):
            if waiting.answer.done():
                continue
            if isinstance(result, ModelAnswer):
                waiting.answer.set_result(result)
            else:
                waiting.answer.set_exception(result.exception() if isinstance(result, ModelFailure) else result)
        self._pump()
