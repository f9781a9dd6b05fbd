"""The graph's one caller of the model replica: tokenize, then predict, under the shared
breaker, the retry matrix and the retry budget.

Retrying here and nowhere else keeps retries from multiplying across layers.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal

from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.api import ModelOutOfMemory, ModelThrottled, ModelUnavailable
from deployments.breaker import BreakerView
from policies.retry import Cause, RetryBudget, RetryConfig, next_step

logger = logging.getLogger("ray.serve")


@dataclass(frozen=True)
class GiveUp:
    """The model gave no answer: fall back to `then`."""

    then: Literal["cache", "degraded", "reject"]
    reason: str  # a retry cause, or breaker_open / breaker_reject_new


def failure_cause(e: BaseException) -> Cause:
    if isinstance(e, (ModelThrottled, BackPressureError)):
        return "throttled"
    if isinstance(e, ModelOutOfMemory):
        return "out_of_memory"
    if not isinstance(e, ModelUnavailable):
        # Dead actors, lost nodes, bugs: all mean "no answer from there now".
        logger.warning("model call failed: %s", type(e).__name__)
    return "unavailable"


class ModelPath:
    def __init__(
        self,
        tokenizer: DeploymentHandle,
        model: DeploymentHandle,
        breaker: BreakerView | None,
        retry: RetryConfig,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        self._tokenizer = tokenizer
        self._model = model
        self._breaker = breaker
        self._retry = retry
        self._budget = RetryBudget(retry)
        self._clock = clock
        self._sleep = sleep
        self.give_ups: collections.Counter[str] = collections.Counter()
        self.retries: collections.Counter[str] = collections.Counter()
        self._retries = Counter(
            "model_retries_total", description="Retries of model calls, by cause.", tag_keys=("cause",)
        )
        self._give_ups = Counter(
            "model_give_ups_total",
            description="Tickets the model path gave no answer for, by reason (they fall back or get 503).",
            tag_keys=("reason",),
        )
        self._tokenizer_fallbacks = Counter(
            "tokenizer_unreachable_total", description="Tickets sent as raw text because the tokenizer did not answer."
        )

    async def classify(self, text: str, request_id: str, tenant: str | None = None) -> dict[str, Any] | GiveUp:
        """`tenant` picks the tenant's instruction prefix (generate mode) and, with the
        KV-cache manager on, the replica holding it: the request router reads it."""
        action = await self._breaker.acquire() if self._breaker else "pass"
        if action in ("fallback", "reject_new"):
            reason = "breaker_open" if action == "fallback" else "breaker_reject_new"
            self._give_up(reason)
            return GiveUp("degraded" if action == "fallback" else "reject", reason)
        self._budget.record_request(self._clock())
        prompt = await self._tokenize(text)
        tries = 0
        while True:
            tries += 1
            start = self._clock()
            try:
                result = await self._model.predict.remote(prompt, request_id, tenant=tenant)
            except Exception as e:
                cause = failure_cause(e)
                if self._breaker and cause != "throttled":
                    # A full queue is the bound doing its job, not a sick replica.
                    self._breaker.record(True, (self._clock() - start) * 1000)
                step = next_step(self._retry, cause, tries, self._budget, self._clock())
                if not step.retry:
                    self._give_up(cause)
                    return GiveUp(step.then, cause)
                self.retries[cause] += 1
                self._retries.inc(tags={"cause": cause})
                await self._sleep(step.wait_s)
                continue
            if self._breaker:
                self._breaker.record(False, (self._clock() - start) * 1000)
            return result

    def _give_up(self, reason: str) -> None:
        self.give_ups[reason] += 1
        self._give_ups.inc(tags={"reason": reason})

    async def _tokenize(self, text: str) -> list[int] | str:
        try:
            return await self._tokenizer.tokenize.remote(text)
        except Exception:
            # The model replica tokenizes raw text itself: slower, but the ticket goes on.
            self._tokenizer_fallbacks.inc()
            return text
