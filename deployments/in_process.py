"""The edge stages inside the ingress replica: `topology: fused`.

Each Serve hop costs more CPU than the work of the anti-spam filter, the edge router and
the tokenizer together (docs/benchmarks.md). Fused, those three run as plain objects in
every ingress replica and are called through `LocalHandle`, which looks like a
DeploymentHandle to them, so the same classes serve both topologies. The rate limiter,
the breaker and the model replica stay deployments: they hold shared state or the engine.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

from ray.serve.handle import DeploymentHandle

from deployments.antispam import AntiSpam
from deployments.config import (
    AntiSpamConfig,
    EdgeConfig,
    RolloutConfig,
    TokenizerConfig,
)
from deployments.edge_router import EdgeRouter
from deployments.tokenizer import Tokenizer
from policies.breaker import BreakerConfig
from policies.micro_batch import MicroBatchConfig
from policies.retry import RetryConfig


class LocalHandle:
    """`handle.method.remote(*args)` on an object in this process: an asyncio task, which
    the caller awaits or cancels as it would a DeploymentResponse."""

    def __init__(self, target: Any):
        self._target = target

    def __getattr__(self, name: str) -> _LocalMethod:
        return _LocalMethod(getattr(self._target, name))


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


async def construct(cls: type, *args, **kwargs) -> Any:
    """An instance of a deployment class whose __init__ may be async, as Serve allows."""
    obj = cls.__new__(cls)
    started = obj.__init__(*args, **kwargs)
    if inspect.isawaitable(started):
        await started
    return obj


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

    async def build(self, nodes: dict[str, DeploymentHandle], breaker: DeploymentHandle) -> dict[str, LocalHandle]:
        """antispam -> edge_router -> tokenizer, as handles, on `nodes`' rate limiter, model
        sides and canary controller; "antispam" takes every ticket."""
        model = nodes["model"]
        tokenizer = LocalHandle(await construct(Tokenizer, self.tokenizer, model, self.model_dir))
        edge = LocalHandle(
            await construct(
                EdgeRouter,
                self.edge,
                tokenizer,
                model,
                self.model_dir,
                breaker,
                self.breaker,
                self.retry,
                nodes.get("canary_controller"),
                nodes.get("canary_model"),
                self.rollout,
                micro_batch=self.micro_batch,
            )
        )
        antispam = LocalHandle(await construct(AntiSpam, self.antispam, nodes["rate_limiter"], edge))
        return {"antispam": antispam, "edge_router": edge, "tokenizer": tokenizer}
