"""The edge stages inside the ingress replica: `topology: fused` (and `colocated`, where
the stable model's replica object joins them).

Each Serve hop costs more CPU than the work of the anti-spam filter, the edge router and
the tokenizer together (docs/benchmarks.md). Fused, those three run as plain objects in
every ingress replica and are called through `LocalHandle`, which looks like a
DeploymentHandle to them, so the same classes serve both topologies. The rate limiter
and the breaker stay deployments: they hold shared state. The model replica does too,
except colocated: then each ingress replica holds an engine, and a model answer crosses
no Serve hop at all (the engine and the ingress then scale together).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from deployments.api import ModelAnswer
from deployments.config import (
    AntiSpamConfig,
    EdgeConfig,
    ModelReplicaConfig,
    RolloutConfig,
    TokenizerConfig,
)
from deployments.graph_nodes import GraphNodes, LocalHandle, TicketPath
from deployments.nodes.antispam import AntiSpam
from deployments.nodes.edge_router import EdgeRouter
from deployments.nodes.model_replica import ModelReplica
from deployments.nodes.tokenizer import Tokenizer
from policies.breaker import BreakerConfig
from policies.micro_batch import MicroBatchConfig
from policies.retry import RetryConfig

if TYPE_CHECKING:
    from deployments.graph_nodes import Node


async def construct(cls: type, *args, **kwargs) -> Any:
    """An instance of a deployment class whose __init__ may be async, as Serve allows."""
    obj = object.__new__(cls)
    started = obj.__init__(*args, **kwargs)
    if inspect.isawaitable(started):
        await started
    return obj


class ColocatedModel:
    """Ingress methods for `topology: colocated` (mixed into it; they read its `_path`)."""

    _path: TicketPath

    @property
    def _own_model(self) -> LocalHandle | None:
        """Its own model replica object (colocated); None where the model is a deployment."""
        path = getattr(self, "_path", None)  # __del__ of an ingress whose __init__ failed
        model = path.model if path is not None else None
        return model if isinstance(model, LocalHandle) else None

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> ModelAnswer:
        """The stable model's answer: the canary controller's golden runs ask it here, as
        colocated has no model deployment to ask."""
        return await self._path.model.predict.remote(prompt, request_id, tenant)

    async def check_health(self) -> None:
        # Colocated, an engine that cannot answer fails its ingress replica, which Serve
        # then replaces (with a new engine), as it replaces a failing model replica.
        if self._own_model is not None:
            await self._own_model.check_health.remote()

    def __del__(self):
        # Serve's graceful shutdown calls this; the engine's processes and KV memory are
        # freed now, not when the actor is reaped.
        if self._own_model is not None:
            self._own_model.target.shutdown()


@dataclass(frozen=True)
class InProcessEdge:
    """Settings of the stages the ingress builds in its own process."""

    antispam: AntiSpamConfig
    edge: EdgeConfig
    tokenizer: TokenizerConfig
    breaker: BreakerConfig
    retry: RetryConfig
    model_dir: str
    rollout: RolloutConfig
    micro_batch: MicroBatchConfig
    # Colocated: the stable model's replica, built here instead of reached in `nodes`.
    model: ModelReplicaConfig | None = None

    # Each stage's arguments, given its neighbours: topology chain binds the same ones as
    # deployments (deployments/graph.py), so both topologies wire a stage alike.
    def tokenizer_args(self, model: Any) -> dict[str, Any]:
        return {"config": self.tokenizer, "model": model, "model_dir": self.model_dir}

    def edge_router_args(
        self, tokenizer: Any, model: Any, breaker: Any, controller: Any, canary: Any
    ) -> dict[str, Any]:
        return {
            "config": self.edge,
            "tokenizer": tokenizer,
            "model": model,
            "model_dir": self.model_dir,
            "breaker": breaker,
            "breaker_config": self.breaker,
            "retry": self.retry,
            "controller": controller,
            "canary": canary,
            "rollout": self.rollout,
            "micro_batch": self.micro_batch,
        }

    def antispam_args(self, limiter: Any, next_node: Any) -> dict[str, Any]:
        return {"config": self.antispam, "limiter": limiter, "next_node": next_node}

    async def build(self, nodes: GraphNodes[Node], breaker: Node) -> GraphNodes[Node]:
        """`nodes` with antispam -> edge_router -> tokenizer as handles to objects of this
        process, on `nodes`' rate limiter, model sides and canary controller; antispam
        takes every ticket. Colocated, the model is this process's own replica object."""
        if self.model is not None:
            model = LocalHandle(await construct(ModelReplica, config=self.model, breaker=breaker))
        else:
            model = nodes.model
        tokenizer = LocalHandle(await construct(Tokenizer, **self.tokenizer_args(model)))
        edge_args = self.edge_router_args(tokenizer, model, breaker, nodes.canary_controller, nodes.canary_model)
        edge = LocalHandle(await construct(EdgeRouter, **edge_args))
        antispam = LocalHandle(await construct(AntiSpam, **self.antispam_args(nodes.rate_limiter, edge)))
        return replace(nodes, antispam=antispam, edge_router=edge, tokenizer=tokenizer, model=model)
