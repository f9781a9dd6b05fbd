"""/healthz: every node of the graph pinged, each within the same timeout."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse

from deployments.api import ApiError
from deployments.graph_nodes import OPTIONAL_NODES, GraphNodes

if TYPE_CHECKING:
    from deployments.graph_nodes import Node


async def graph_health(nodes: GraphNodes[Node], timeout_s: float) -> JSONResponse:
    """200 "ok" when every node answers; 200 "degraded" when only optional nodes fail (the
    tickets still get answers); 503 otherwise, naming the nodes that did not answer."""

    async def probe(handle: Node) -> str:
        try:
            await asyncio.wait_for(handle.ping.remote(), timeout_s)
            return "ok"
        except Exception as e:  # any failure of a node makes the graph unhealthy
            return f"{type(e).__name__}"

    named = nodes.named()
    states = await asyncio.gather(*(probe(handle) for handle in named.values()))
    status = {"ingress": "ok", **dict(zip(named, states))}
    failed = [k for k, v in status.items() if v != "ok"]
    if not failed:
        return JSONResponse({"status": "ok", "nodes": status})
    if all(k in OPTIONAL_NODES for k in failed):
        return JSONResponse({"status": "degraded", "nodes": status})
    return JSONResponse(
        {**ApiError(503, "unhealthy", f"not answering: {', '.join(failed)}").body(), "nodes": status}, 503
    )
