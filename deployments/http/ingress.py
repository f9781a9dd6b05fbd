"""HTTP front door: validates and normalizes tickets, hands them to the first node of the graph."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter, Histogram

from deployments.api import (
    Answer,
    ApiError,
    BatchRequest,
    ClassifyRequest,
    ClassifyResponse,
    Ticket,
    describe_validation_errors,
    normalize_text,
)
from deployments.config import IngressConfig
from deployments.config_loop import ReviewConfig
from deployments.graph_nodes import GraphNodes, TicketPath
from deployments.http.admin import AdminEndpoints
from deployments.http.health import graph_health
from deployments.http.holding import BackgroundHold, CapacityRefusal
from deployments.http.request_context import RequestContext
from deployments.http.review_recorder import ReviewRecorder
from deployments.metrics.answer_metrics import AnswerMetrics
from deployments.metrics.held_gauge import HeldGauge
from deployments.metrics.metric_tags import tag_keys
from deployments.nodes.in_process import ColocatedModel, InProcessEdge
from models.artifacts import ModelMetadata
from policies.admission import AdaptiveConcurrency
from policies.window import LatencyWindow

if TYPE_CHECKING:
    from deployments.graph_nodes import Node

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS: dict[str, Any] = {
    "name": "Ingress",
    # Light async glue: many requests in flight, no CPU reservation (2-core machines).
    # Above the admission limit's max_limit, so that the ingress itself answers an
    # overload with our JSON 503; past both, Serve's proxy answers its own (plain-text)
    # 503, with Retry-After too.
    "max_ongoing_requests": 1024,
    "max_queued_requests": 1024,
    "backpressure_config": {"retry_after_s": 1},
    "ray_actor_options": {"num_cpus": 0},
    # > request_timeout_s (serve_app checks): a replaced ingress answers all it holds (Serve's 20 s: 500s)
    "graceful_shutdown_timeout_s": 45,
    "max_surge_percent": 100,  # an upgrade starts the new ingress before the old one stops
}
LATENCY_BOUNDARIES_MS = [5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0]


class Ingress(AdminEndpoints, ColocatedModel):
    async def __init__(
        self,
        config: IngressConfig,
        nodes: GraphNodes[Node],
        model_dir: str,
        in_process: InProcessEdge | None = None,
        breaker: DeploymentHandle | None = None,
        review: ReviewConfig | None = None,
        rng: random.Random | None = None,
    ):
        """`nodes` are all deployments behind it, for /healthz (and the model for
        /v1/labels); their anti-spam filter takes every ticket. `model_dir` holds the model
        it answers for. With `in_process` (topology fused) the edge stages are built here
        instead, on `nodes`' rate limiter and model and on `breaker` (colocated: the model
        too, ColocatedModel)."""
        if in_process is not None:
            if breaker is None:
                raise ValueError("in-process stages need the shared breaker's handle")
            nodes = await in_process.build(nodes, breaker)
        self._config = config
        self._nodes = nodes
        self._path = TicketPath.of(nodes)
        self._review = ReviewRecorder(review or ReviewConfig(enabled=False), nodes.review_queue, rng)
        # Its own model's, not the first replica's to answer (the old one's in a rolling upgrade).
        model = ModelMetadata.load(model_dir)
        self._answers = AnswerMetrics(model.labels, model.label_mix, config.label_drift)
        self._ongoing = 0
        self._peak = 0
        self._hold = BackgroundHold(config.background)
        self._admission = AdaptiveConcurrency(config.admission, time.monotonic())
        self._recent = LatencyWindow(config.admission.interval_s)
        self._requests = Counter(
            "ticket_requests_total",
            description="Classify requests answered, by route and HTTP status.",
            tag_keys=tag_keys("route", "status"),
        )
        self._admission_limit = HeldGauge(
            "ingress_admission_limit", description="Tickets in flight this ingress replica admits now."
        )
        self._admission_limit.set(self._admission.limit)
        self._latency = Histogram(
            "ticket_request_latency_ms",
            description="Time spent inside the service per ticket, by route and HTTP status.",
            boundaries=LATENCY_BOUNDARIES_MS,
            tag_keys=tag_keys("route", "status"),
        )

    async def classify(self, body: ClassifyRequest, request: Request) -> JSONResponse:
        context = RequestContext.of(request, self._config)
        answer = await self._answer(body, context.request_id, time.perf_counter(), context)
        if isinstance(answer, ApiError):
            return JSONResponse(answer.body(), answer.status, headers=answer.headers())
        return JSONResponse(answer.model_dump())

    async def classify_batch(self, body: BatchRequest, request: Request) -> JSONResponse:
        if len(body.tickets) > self._config.max_batch_tickets:
            raise ApiError(
                413,
                "batch_too_large",
                f"{len(body.tickets)} tickets; at most {self._config.max_batch_tickets} per batch",
            )
        start = time.perf_counter()
        context = RequestContext.of(request, self._config)
        answers = await asyncio.gather(
            *(
                self._answer(ticket, f"{context.request_id}-{i}", start, context)
                for i, ticket in enumerate(body.tickets)
            )
        )
        # The batch is answered 200 whatever its items; a refused item (rate limit, overload)
        # carries its own retry_after_s, and the answer the largest as Retry-After, so a
        # batch client can back off as a single-ticket one does.
        waits = [a.retry_after_s for a in answers if isinstance(a, ApiError) and a.retry_after_s is not None]
        results = [a.item_body() if isinstance(a, ApiError) else a.model_dump() for a in answers]
        return JSONResponse({"results": results}, headers={"Retry-After": str(max(waits))} if waits else None)

    async def labels(self) -> dict[str, Any]:
        return await self._path.model.labels.remote()

    async def healthz(self) -> JSONResponse:
        return await graph_health(self._nodes, self._config.health_timeout_s)

    async def _answer(
        self, ticket: Any, request_id: str, start: float, context: RequestContext
    ) -> ClassifyResponse | ApiError:
        """One ticket, answered or refused, and counted; held if background (policies.deferral)."""
        try:
            body = ticket if isinstance(ticket, ClassifyRequest) else ClassifyRequest.model_validate(ticket)
        except ValidationError as e:
            answer: ClassifyResponse | ApiError = ApiError(
                422, "invalid_request", describe_validation_errors(e.errors())
            )
        else:
            answer = await self._admitted(body, request_id, start, context)
            if isinstance(answer, CapacityRefusal) and body.priority == "background":
                answer = await self._hold.answer(
                    lambda: self._admitted(body, request_id, start, context),
                    answer,
                    start,
                    lambda: (self._ongoing, self._admission.limit),
                )
        if isinstance(answer, ApiError):
            tags = {"route": "none", "status": str(answer.status)}
            self._latency.observe((time.perf_counter() - start) * 1000, tags=tags)
        else:
            tags = {"route": answer.route, "status": "200"}
            self._latency.observe(answer.latency_ms, tags=tags)
        self._requests.inc(tags=tags)
        return answer

    def _adapt_admission(self, latency_ms: float) -> None:
        now = time.monotonic()
        self._recent.add(latency_ms, now)
        if self._admission.due(now):
            limit = self._admission.update(self._recent.quantile_ms(0.99, now), self._peak, now)
            self._peak = self._ongoing
            self._admission_limit.set(limit)

    async def _admitted(
        self, body: ClassifyRequest, request_id: str, start: float, context: RequestContext
    ) -> ClassifyResponse | ApiError:
        admitted = time.perf_counter()
        self._ongoing += 1
        self._peak = max(self._peak, self._ongoing)
        try:
            if self._ongoing > self._admission.limit:
                # Shed before any work: a fast 503 beats a slot in a queue that cannot drain in time.
                return CapacityRefusal("too many tickets in flight; retry later", self._config.retry_after_s)
            answer = await self._classify_one(body, request_id, start, context)
        except ApiError as e:
            return e
        finally:
            self._ongoing -= 1
        # The limit adapts on time in service from this try: not a held ticket's wait before it.
        self._adapt_admission((time.perf_counter() - admitted) * 1000)
        return answer

    async def _classify_one(
        self, body: ClassifyRequest, request_id: str, start: float, context: RequestContext
    ) -> ClassifyResponse:
        ticket = Ticket(
            text=normalize_text(body.text, self._config.max_text_chars),
            request_id=request_id,
            user_id=body.user_id,
            tenant=body.tenant,
            client=context.client,
            tier_header=context.tier_header,
            lang_hint=body.lang or context.accept_language,
            ticket_id=body.ticket_id,
            color=context.color,
        )
        response = self._path.antispam.classify.remote(ticket)
        try:
            result = await asyncio.wait_for(response, self._config.request_timeout_s)
        except BackPressureError:
            raise CapacityRefusal(
                "a queue on the ticket's path is full; retry later", self._config.retry_after_s
            ) from None
        except TimeoutError:
            response.cancel()
            raise ApiError(
                503, "overloaded", f"no answer within {self._config.request_timeout_s}s", self._config.retry_after_s
            ) from None
        except RayActorError:  # a stage died with the ticket (replaced, node lost): a retry finds its successor
            raise ApiError(
                503, "overloaded", "a stage on the ticket's path went away", self._config.retry_after_s
            ) from None
        except Exception:
            # Never echo the ticket text: logs must not hold customer data.
            logger.exception("model path failed for request %s", request_id)
            raise ApiError(500, "internal_error", f"the model path failed; request_id {request_id}") from None
        if not isinstance(result, Answer):
            raise result.error()
        needs_review = await self._review.flag(body, ticket, result, request_id)
        self._answers.answered(result.label, result.route, result.confidence, needs_review)
        return ClassifyResponse(
            label=result.label,
            confidence=round(result.confidence, 6),
            route=result.route,
            model_version=result.model_version,
            request_id=request_id,
            latency_ms=round((time.perf_counter() - start) * 1000, 2),
            language=result.language,
            answer_id=result.answer_id,
            degraded=result.degraded,
            needs_review=needs_review,
        )
