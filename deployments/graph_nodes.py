"""The nodes behind the ingress, by role: what /healthz probes, what the admin routes and
the in-process stages call. serve_app binds one; topology fused fills in the edge stages
the ingress builds in its own process (colocated: the model too)."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle


class LocalHandle:
    """`handle.method.remote(*args)` on an object in this process: an asyncio task, which
    the caller awaits or cancels as it would a DeploymentResponse."""

    def __init__(self, target: Any):
        self.target = target

    def __getattr__(self, name: str) -> _LocalMethod:
        return _LocalMethod(getattr(self.target, name))


class _LocalMethod:
    def __init__(self, method):
        self._method = method

    def remote(self, *args, **kwargs) -> asyncio.Future:
        result = self._method(*args, **kwargs)
        if inspect.isawaitable(result):
            return asyncio.ensure_future(result)
        done = asyncio.get_running_loop().create_future()
        done.set_result(result)
        return done


if TYPE_CHECKING:
    Node = DeploymentHandle | LocalHandle


# Bound applications in serve_app; Serve hands the ingress handles to them (Node).
N = TypeVar("N")

# Nodes the graph answers without: /healthz stays 200, with status "degraded", while they
# are down. Model calls fall back to Serve's default routing (KV-cache manager) or to the
# stable side (canary controller, canary model).
OPTIONAL_NODES = frozenset({"kv_cache_manager", "review_queue", "canary_controller", "canary_model", "retrainer"})


@dataclass(frozen=True)
class GraphNodes(Generic[N]):
    rate_limiter: N
    # None only until a colocated ingress builds its own.
    model: N | None = None
    # The edge stages: deployments in topology chain, the ingress's own objects in fused.
    antispam: N | None = None
    edge_router: N | None = None
    tokenizer: N | None = None
    kv_cache_manager: N | None = None
    review_queue: N | None = None
    retrainer: N | None = None
    canary_model: N | None = None
    canary_controller: N | None = None

    def named(self) -> dict[str, N]:
        """The nodes present, by field name (the names /healthz and /admin/state show)."""
        present = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: node for name, node in present if node is not None}


@dataclass(frozen=True)
class TicketPath:
    """The stages every ticket passes, each present once the ingress has built its own
    (fused, colocated): what the ingress and its admin routes call."""

    antispam: Node
    edge_router: Node
    tokenizer: Node
    model: Node

    @classmethod
    def of(cls, nodes: GraphNodes[Node]) -> TicketPath:
        if nodes.antispam is None or nodes.edge_router is None or nodes.tokenizer is None or nodes.model is None:
            raise ValueError(
                f"a ticket's path needs antispam, edge_router, tokenizer and model; the graph has {sorted(nodes.named())}"
            )
        return cls(nodes.antispam, nodes.edge_router, nodes.tokenizer, nodes.model)
