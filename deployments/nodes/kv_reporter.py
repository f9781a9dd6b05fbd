"""The model replica's side of the KV-cache manager (deployments/nodes/kv_manager.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ray.serve.handle import DeploymentHandle

from deployments.config import KVCacheConfig
from deployments.engines import Prediction
from deployments.nodes.kv_manager import PrefixUse

logger = logging.getLogger("ray.serve")

# A report is off the request path; a manager slower than this counts as gone for one interval.
KV_REPORT_TIMEOUT_S = 5.0


class PrefixEngine(Protocol):
    """What the reporter uses of an engine (TicketEngine has it): its prefixes, its cache's
    size, and a way to compute a prefix into the cache."""

    def prefixes(self) -> dict[str, list[int]]: ...

    def kv_cache(self) -> tuple[int, int]: ...

    async def warm(self, prefix_ids: list[int], request_id: str) -> None: ...


class KVReporter:
    """The replica's side of the KV-cache manager: join with its prefixes and cache size,
    compute the hot prefixes it is told to before taking traffic, then send what its
    requests put in the cache, one call per interval (also when idle), off the request path."""

    def __init__(self, manager: DeploymentHandle, config: KVCacheConfig, engine: PrefixEngine, replica: str):
        self._manager = manager
        self._config = config
        self._engine = engine
        self._replica = replica
        self._prefixes = engine.prefixes()
        blocks, block_tokens = engine.kv_cache()
        self._capacity_tokens = blocks * block_tokens
        # vLLM caches whole blocks only: a hit is every full block of the prefix served.
        self._full_tokens = {k: len(ids) // block_tokens * block_tokens for k, ids in self._prefixes.items()}
        self._uses: list[PrefixUse] = []
        self._warmed: list[str] = []
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self._join(), self._config.warmup_timeout_s)
        except Exception as e:  # no manager, or a slow warm-up: serve cold rather than not at all
            logger.warning("KV-cache manager join/warm-up incomplete: %s", type(e).__name__)
        self._task = asyncio.get_running_loop().create_task(self._report_loop())

    async def _join(self) -> None:
        keys = await self._manager.join.remote(self._replica, self._prefixes, self._capacity_tokens)
        for key in keys:
            if key in self._prefixes:
                await self._engine.warm(self._prefixes[key], f"warmup-{key}-{self._replica}")
                self._warmed.append(key)
        if keys:
            logger.info("warmed %d hot prefixes: %s", len(self._warmed), ", ".join(self._warmed))

    def record(self, p: Prediction) -> None:
        if p.prefix_key is None or p.prefix_key not in self._full_tokens:
            return
        hit = 0 < self._full_tokens[p.prefix_key] <= p.cached_tokens
        self._uses.append(PrefixUse(p.prefix_key, hit, p.prompt_tokens, p.cached_tokens, p.ttft_ms))

    async def _report_loop(self) -> None:
        while True:
            # Sent even without uses: a manager back from a restart learns an idle replica
            # within one interval instead of at its next ticket.
            await asyncio.sleep(self._config.report_interval_ms / 1000)
            uses, warmed, self._uses, self._warmed = self._uses, self._warmed, [], []
            try:
                known = await asyncio.wait_for(
                    self._manager.report.remote(self._replica, uses, warmed), KV_REPORT_TIMEOUT_S
                )
                if not known:  # the manager restarted: tell it again what this replica is
                    await self._manager.join.remote(self._replica, self._prefixes, self._capacity_tokens)
                    await self._manager.report.remote(self._replica, uses, warmed)
            except Exception as e:  # the registry misses one interval; routing falls back meanwhile
                logger.info("KV-cache manager report dropped (%d uses): %s", len(uses), type(e).__name__)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
