"""The graph's one caller of the model replicas: tokenize, then predict, under the shared
breaker, the retry matrix and the retry budget; with a canary deployed, on the side the
split picks.

Retrying here and nowhere else keeps retries from multiplying across layers. A canary
that fails a ticket hands it to stable (counted against the canary, not the breaker).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.api import ModelAnswer, ModelOutOfMemory, ModelThrottled, ModelUnavailable
from deployments.callers.breaker_view import BreakerView
from deployments.callers.call_batcher import CallBatcher
from deployments.callers.canary_view import CanaryView
from deployments.metrics.metric_tags import tag_keys
from policies.canary import Side
from policies.hedge import Hedger
from policies.micro_batch import MicroBatchConfig
from policies.retry import Cause, RetryBudget, RetryConfig, next_step

logger = logging.getLogger("ray.serve")
# Why the model path gave up: a retry cause, or the breaker's refusal.
GiveUpReason = Cause | Literal["breaker_open", "breaker_reject_new"]


@dataclass(frozen=True)
class GiveUp:
    """The model gave no answer: fall back to `then`."""

    then: Literal["cache", "degraded", "reject"]
    reason: GiveUpReason


def failure_cause(e: BaseException) -> Cause:
    if isinstance(e, TimeoutError):
        return "timeout"
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
        canary: DeploymentHandle | None = None,
        split: CanaryView | None = None,
        canary_takes_tokens: bool = True,
        micro_batch: MicroBatchConfig | None = None,
    ):
        """`canary_takes_tokens`: the canary shares stable's tokenizer (else it gets raw text).
        `micro_batch` (enabled): stable's calls carry the tickets that piled up together;
        the canary's, a small share, go one by one."""
        self._tokenizer = tokenizer
        self.batcher = (
            CallBatcher(model, micro_batch, retry.per_try_timeout_ms / 1000, clock)
            if micro_batch is not None and micro_batch.enabled
            else None
        )
        self._call_stable: Callable[[list[int] | str, str, str | None], Awaitable[ModelAnswer]] = (
            self.batcher.predict
            if self.batcher
            else lambda prompt, request_id, tenant: model.predict.remote(prompt, request_id, tenant=tenant)
        )
        self._canary = canary
        self.split = split
        self._canary_takes_tokens = canary_takes_tokens
        self._shadows: set[asyncio.Task] = set()
        self._breaker = breaker
        self._retry = retry
        self._try_s = retry.per_try_timeout_ms / 1000
        self._budget = RetryBudget(retry)
        self.hedger = Hedger(retry.hedge) if retry.hedge.enabled else None
        self._clock = clock
        self._sleep = sleep
        self.give_ups: collections.Counter[str] = collections.Counter()
        self.retries: collections.Counter[str] = collections.Counter()
        # With hedging on: first calls, copies sent, copies that answered first.
        self.hedges: collections.Counter[str] = collections.Counter()
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
        self._hedges = Counter(
            "model_hedges_total",
            description="Second copies of slow model calls: sent, and won (the copy answered first).",
            tag_keys=("outcome",),
        )
        self._sides = Counter(
            "canary_side_calls_total",
            description="Model calls by side (stable, canary, shadow) and outcome (ok, failed).",
            tag_keys=tag_keys("side", "outcome"),
        )

    def route(self, ticket_key: str, color: str | None) -> tuple[Side, bool]:
        """(side that answers, whether the canary answers a shadow copy too)."""
        if self.split is None or self._canary is None:
            return "stable", False
        return self.split.route(ticket_key, color)

    async def classify(
        self, text: str, request_id: str, tenant: str | None = None, side: Side = "stable", shadow: bool = False
    ) -> ModelAnswer | GiveUp:
        """`tenant` picks the tenant's instruction prefix (generate mode) and, with the
        KV-cache manager on, the replica holding it: the request router reads it."""
        action = await self._breaker.acquire() if self._breaker else "pass"
        if action in ("fallback", "reject_new"):
            reason = "breaker_open" if action == "fallback" else "breaker_reject_new"
            self._give_up(reason)
            return GiveUp("degraded" if action == "fallback" else "reject", reason)
        self._budget.record_request(self._clock())
        prompt = await self._tokenize(text)
        canary, view = self._canary, self.split
        if canary is None or view is None:
            return await self._ask_stable(prompt, request_id, tenant)
        ask = functools.partial(self._ask_canary, canary, view, prompt if self._canary_takes_tokens else text)
        if side == "canary":
            answer = await ask(request_id, tenant, "canary")
            if answer is not None:
                return dataclasses.replace(answer, side="canary")
            return await self._ask_stable(prompt, request_id, tenant)
        if not shadow:
            return await self._ask_stable(prompt, request_id, tenant)
        copy = asyncio.ensure_future(ask(f"{request_id}-shadow", tenant, "shadow"))
        result = await self._ask_stable(prompt, request_id, tenant)
        compare = asyncio.ensure_future(self._compare(view, copy, result))
        self._shadows.add(compare)  # held until done: the loop keeps only weak references to tasks
        compare.add_done_callback(self._shadows.discard)
        return result

    async def _ask_canary(
        self,
        canary: DeploymentHandle,
        view: CanaryView,
        prompt: list[int] | str,
        request_id: str,
        tenant: str | None,
        kind: str,
    ) -> ModelAnswer | None:
        start = self._clock()
        try:
            answer = await asyncio.wait_for(canary.predict.remote(prompt, request_id, tenant=tenant), self._try_s)
        except Exception as e:
            logger.warning("canary call failed: %s", type(e).__name__)
            self._sides.inc(tags={"side": kind, "outcome": "failed"})
            view.record("canary", 0.0, failed=True)
            return None
        self._sides.inc(tags={"side": kind, "outcome": "ok"})
        view.record("canary", (self._clock() - start) * 1000, failed=False)
        return answer

    async def _compare(
        self, view: CanaryView, copy: Awaitable[ModelAnswer | None], stable: ModelAnswer | GiveUp
    ) -> None:
        answer = await copy
        if answer is not None and not isinstance(stable, GiveUp):
            view.record_shadow(answer.label == stable.label)

    async def _ask_stable(self, prompt: list[int] | str, request_id: str, tenant: str | None) -> ModelAnswer | GiveUp:
        tries = 0
        while True:
            tries += 1
            start = self._clock()
            try:
                # Serve queues a call while the deployment has no replica (one being
                # replaced): without a deadline the ticket would wait out the ingress's.
                result = await asyncio.wait_for(self._call_once(prompt, request_id, tenant), self._try_s)
            except Exception as e:
                cause = failure_cause(e)
                self._sides.inc(tags={"side": "stable", "outcome": "failed"})
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
            took_ms = (self._clock() - start) * 1000
            if self._breaker:
                self._breaker.record(False, took_ms)
            if self.split is not None:
                self.split.record("stable", took_ms, failed=False)
            self._sides.inc(tags={"side": "stable", "outcome": "ok"})
            return result

    async def _call_once(self, prompt: list[int] | str, request_id: str, tenant: str | None) -> ModelAnswer:
        """One try of a stable call. With hedging on, a call unanswered past the hedge delay
        gets a copy (Serve's router sends it to the less loaded of two replicas, which a
        slow one is not) and the first answer wins; the other call is cancelled."""
        if self.hedger is None:
            return await self._call_stable(prompt, request_id, tenant)
        start = self._clock()
        self.hedger.record_call(start)
        self.hedges["calls"] += 1
        first = self._call_stable(prompt, request_id, tenant)
        calls = {asyncio.ensure_future(first): first}
        racing = set(calls)
        try:
            delay = self.hedger.delay_s()
            if delay is not None:
                done, _ = await asyncio.wait(racing, timeout=delay)
                if not done and self.hedger.try_spend(self._clock()):
                    copy = self._call_stable(prompt, f"{request_id}-hedge", tenant)
                    task = asyncio.ensure_future(copy)
                    calls[task] = copy
                    racing.add(task)
                    self.hedges["sent"] += 1
                    self._hedges.inc(tags={"outcome": "sent"})
            while True:
                done, racing = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                answered = [task for task in done if task.exception() is None]
                if answered:
                    self.hedger.record_answer(self._clock() - start)
                    if calls[answered[0]] is not first:
                        self.hedges["won"] += 1
                        self._hedges.inc(tags={"outcome": "won"})
                    return answered[0].result()
                if not racing:
                    # Every call failed: the retry matrix reads the cause of the last one.
                    raise done.pop().exception() or RuntimeError("a model call failed without an exception")
        finally:
            for task in racing:
                task.cancel()
                # A DeploymentResponse cancels its request in the replica (vLLM aborts it);
                # cancelling the task that awaits it alone would leave the replica working.
                cancel = getattr(calls[task], "cancel", None)
                if cancel is not None:
                    cancel()

    def _give_up(self, reason: GiveUpReason) -> None:
        self.give_ups[reason] += 1
        self._give_ups.inc(tags={"reason": reason})

    async def _tokenize(self, text: str) -> list[int] | str:
        try:
            return await self._tokenizer.tokenize.remote(text)
        except Exception:
            # The model replica tokenizes raw text itself: slower, but the ticket goes on.
            self._tokenizer_fallbacks.inc()
            return text
