"""The nodes behind the ingress, by role: what /healthz probes, what the admin routes and
the in-process stages call. serve_app binds one; topology fused fills in the edge stages
the ingress builds in its own process (colocated: the model too)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

    from deployments.in_process import LocalHandle

    Node = DeploymentHandle | LocalHandle

# Nodes the graph answers without: /healthz stays 200, with status "degraded", while they
# are down. Model calls fall back to Serve's default routing (KV-cache manager) or to the
# stable side (canary controller, canary model).
OPTIONAL_NODES = frozenset({"kv_cache_manager", "review_queue", "canary_controller", "canary_model", "retrainer"})


@dataclass(frozen=True)
class GraphNodes:
    rate_limiter: Node
    # None only until a colocated ingress builds its own.
    model: Node | None = None
    # The edge stages: deployments in topology chain, the ingress's own objects in fused.
    antispam: Node | None = None
    edge_router: Node | None = None
    tokenizer: Node | None = None
    kv_cache_manager: Node | None = None
    review_queue: Node | None = None
    retrainer: Node | None = None
    canary_model: Node | None = None
    canary_controller: Node | None = None

    def named(self) -> dict[str, Node]:
        """The nodes present, by field name (the names /healthz and /admin/state show)."""
        present = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: node for name, node in present if node is not None}
