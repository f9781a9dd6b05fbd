"""The /admin API: review queue, rollout and cache controls on a router whose every route
needs the bearer token (deployments/http/admin_auth.py)."""

from __future__ import annotations

import asyncio
import csv
import io
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from deployments.api import (
    ApiError,
    EraseRequest,
    ErrorBody,
    NoCanary,
    ProposeRequest,
    Refusal,
    ResolveRequest,
    RollbackRequest,
    SplitRequest,
)
from deployments.config import IngressConfig
from deployments.config_loop import AdminConfig
from deployments.graph_nodes import GraphNodes, TicketPath
from deployments.http.admin_auth import Role, documented, json_body, require_token
from policies.admission import AdaptiveConcurrency

if TYPE_CHECKING:
    from deployments.graph_nodes import Node


class AdminEndpoints:
    """The /admin routes of Ingress (mixed into it): they read the ingress's state below."""

    _nodes: GraphNodes[Node]
    _path: TicketPath
    _config: IngressConfig
    _admission: AdaptiveConcurrency
    _ongoing: int

    def _queue(self) -> Node:
        queue = self._nodes.review_queue
        if queue is None:
            raise ApiError(404, "not_found", "the review queue is off (review.enabled: false)")
        return queue

    def _controller(self) -> Node:
        controller = self._nodes.canary_controller
        if controller is None:
            raise ApiError(404, "not_found", "this graph has no canary controller")
        return controller

    async def _rollout(self, action: str, *args: Any) -> dict[str, Any]:
        try:
            return await getattr(self._controller(), action).remote(*args)
        except NoCanary as e:
            raise ApiError(409, "no_canary", str(e)) from None

    async def _rollout_state(self) -> dict[str, Any] | None:
        if self._nodes.canary_controller is None:
            return None
        try:
            return await asyncio.wait_for(self._nodes.canary_controller.state.remote(), self._config.health_timeout_s)
        except Exception as e:  # the rest of the state is still worth showing
            return {"error": type(e).__name__}

    async def admin_state(self) -> dict[str, Any]:
        labels = await self._path.model.labels.remote()
        review = None
        if self._nodes.review_queue is not None:
            review = {**await self._queue().counts.remote(), "audit": asdict(await self._queue().audit.remote())}
        return {
            "model_version": labels["model_version"],
            "admission_limit": self._admission.limit,
            "in_flight": self._ongoing,
            "review": review,
            "rollout": await self._rollout_state(),
            # One edge router's counts (fused: this ingress replica's own): cache, the model
            # path's retries, give-ups and hedged calls.
            "edge": await self._path.edge_router.stats.remote(),
            # One anti-spam filter's adaptive thresholds and one tokenizer's counts (fused:
            # this replica's own).
            "antispam": {"thresholds": await self._path.antispam.thresholds.remote()},
            "tokenizer": await self._path.tokenizer.stats.remote(),
            "nodes": sorted(self._nodes.named()),
        }

    async def admin_rollout_split(self, body: SplitRequest = Depends(json_body(SplitRequest))) -> dict[str, Any]:
        """Sets the canary's share and/or shadow mode; the judge goes on from there."""
        if body.percent is None and body.shadow is None:
            raise ApiError(422, "invalid_request", "give percent (0-100), shadow (true/false) or both")
        return await self._rollout("set_split", body.percent, body.shadow)

    async def admin_rollout_promote(self) -> dict[str, Any]:
        return await self._rollout("promote")

    async def admin_rollout_rollback(
        self, body: RollbackRequest = Depends(json_body(RollbackRequest, optional=True))
    ) -> dict[str, Any]:
        return await self._rollout("rollback", body.reason)

    def _retrainer(self) -> Node:
        retrainer = self._nodes.retrainer
        if retrainer is None:
            raise ApiError(404, "not_found", "retraining is off (retrain.enabled: false, or review.enabled: false)")
        return retrainer

    async def admin_retrain_start(self) -> JSONResponse:
        """Starts a retrain from the resolved review items (a Ray task); 202 with the run."""
        run = await self._retrainer().start.remote()
        if isinstance(run, Refusal):
            raise run.error()
        return JSONResponse(asdict(run), 202)

    async def admin_retrain_state(self) -> dict[str, Any]:
        """The running or last retrain, its log's last lines, and the runs before it."""
        return await self._retrainer().state.remote()

    async def admin_retrain_stop(self) -> dict[str, Any]:
        run = await self._retrainer().stop.remote()
        if isinstance(run, Refusal):
            raise run.error()
        return asdict(run)

    async def admin_models_restore(self) -> dict[str, Any]:
        """Stable back to the model before the last promotion (the `previous` alias)."""
        return await self._rollout("restore_stable")

    async def admin_cache_flush(self) -> dict[str, Any]:
        """Every edge router drops its result cache at its next sync with the controller."""
        return await self._controller().flush_caches.remote()

    async def admin_review_items(
        self,
        status: Literal["open", "resolved", "all"] = "open",
        limit: int = 50,
        offset: int = 0,
        kind: Literal["review", "audit", "all"] = "all",
    ) -> dict[str, Any]:
        # Clamped, not refused; SQLite takes 64-bit integers only.
        limit, offset = max(1, min(limit, 500)), max(0, min(offset, 2**62))
        queue = self._queue()
        items = await queue.items.remote(status, limit, offset, None if kind == "all" else kind)
        return {"items": items, "limit": limit, "offset": offset, "counts": await queue.counts.remote()}

    async def admin_whoami(self, request: Request) -> dict[str, Role]:
        """The caller's role, for the console to show what it may do."""
        return {"role": request.state.role}

    async def _served_labels(self) -> list[str]:
        labels = await self._path.model.labels.remote()
        return [entry["name"] for entry in labels["labels"]]

    async def admin_review_resolve(
        self, item_id: int, body: ResolveRequest = Depends(json_body(ResolveRequest))
    ) -> dict[str, Any]:
        # A label people accepted is theirs to use before a model has learnt it.
        accepted = [p.name for p in await self._queue().proposals.remote("accepted")]
        allowed = await self._served_labels() + accepted
        if body.label not in allowed:
            raise ApiError(422, "invalid_request", f"label {body.label!r} is not one of {', '.join(allowed)}")
        item = await self._queue().resolve.remote(item_id, body.label)
        if item is None:
            raise ApiError(404, "not_found", f"no review item {item_id}")
        return item

    async def admin_review_propose(
        self, item_id: int, body: ProposeRequest = Depends(json_body(ProposeRequest))
    ) -> dict[str, Any]:
        """Files the item under a new label; an admin accepts or rejects the label."""
        if body.label in await self._served_labels():
            raise ApiError(422, "invalid_request", f"label {body.label!r} exists: resolve the item with it instead")
        item = await self._queue().propose.remote(item_id, body.label, body.description)
        if item is None:
            raise ApiError(404, "not_found", f"no review item {item_id}")
        return item

    async def admin_label_proposals(
        self, status: Literal["open", "accepted", "rejected", "all"] = "open"
    ) -> dict[str, Any]:
        proposals = await self._queue().proposals.remote(None if status == "all" else status)
        return {"proposals": [asdict(p) for p in proposals]}

    async def _decide(self, name: str, accept: bool) -> dict[str, Any]:
        proposal = await self._queue().decide.remote(name, accept)
        if proposal is None:
            raise ApiError(404, "not_found", f"no open proposal {name!r}")
        return asdict(proposal)

    async def admin_label_accept(self, name: str) -> dict[str, Any]:
        """The label joins the taxonomy people resolve with; its items resolve to it and
        the next retrain learns it."""
        return await self._decide(name, True)

    async def admin_label_reject(self, name: str) -> dict[str, Any]:
        """Its items return to the open queue."""
        return await self._decide(name, False)

    async def admin_review_erase(self, body: EraseRequest = Depends(json_body(EraseRequest))) -> dict[str, Any]:
        """Deletes every stored item of a tenant or an end user (a data-erasure request)."""
        if body.tenant is None and body.user_id is None:
            raise ApiError(422, "invalid_request", "give tenant, user_id or both")
        return {"erased": await self._queue().erase.remote(body.tenant, body.user_id)}

    async def admin_review_export(self) -> Response:
        """Resolved items as training rows (CSV text,label,lang) for `python -m models.build --data`."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=["text", "label", "lang"])
        writer.writeheader()
        writer.writerows(await self._queue().training_rows.remote())
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8")


def admin_router(cls: type[AdminEndpoints], config: AdminConfig) -> APIRouter:
    """`cls`'s admin methods as routes under /admin, all behind the token."""
    responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorBody} for status in (400, 401, 403, 404, 409, 422)
    }
    router = APIRouter(prefix="/admin", dependencies=[Depends(require_token(config))], responses=responses)
    router.get("/whoami")(cls.admin_whoami)
    router.get("/state")(cls.admin_state)
    router.get("/review")(cls.admin_review_items)
    router.get("/review/export")(cls.admin_review_export)
    router.post("/review/{item_id}/resolve", openapi_extra=documented(ResolveRequest))(cls.admin_review_resolve)
    router.post("/review/{item_id}/propose", openapi_extra=documented(ProposeRequest))(cls.admin_review_propose)
    router.post("/review/erase", openapi_extra=documented(EraseRequest))(cls.admin_review_erase)
    router.get("/labels/proposals")(cls.admin_label_proposals)
    router.post("/labels/proposals/{name}/accept")(cls.admin_label_accept)
    router.post("/labels/proposals/{name}/reject")(cls.admin_label_reject)
    router.post("/rollout", openapi_extra=documented(SplitRequest))(cls.admin_rollout_split)
    router.post("/rollout/promote")(cls.admin_rollout_promote)
    router.post("/rollout/rollback", openapi_extra=documented(RollbackRequest))(cls.admin_rollout_rollback)
    router.post("/cache/flush")(cls.admin_cache_flush)
    router.post("/models/restore")(cls.admin_models_restore)
    router.post("/retrain", status_code=202)(cls.admin_retrain_start)
    router.get("/retrain")(cls.admin_retrain_state)
    router.post("/retrain/stop")(cls.admin_retrain_stop)
    return router
