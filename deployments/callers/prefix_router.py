"""Prefix-affinity request router for the model replica (Serve's custom request router API).

A request whose `tenant` has its own instruction prefix goes to a replica whose vLLM
prefix cache holds that prefix (asked of the KV-cache manager, answer reused for
`hint_ttl_ms`), or, if none does, to the prefix's home replica, so concurrent first
requests of a tenant do not compute its prefix on every replica; an overloaded choice
gives way to the least loaded replica (`kv_partition.affinity.choose`). Everything else,
and every request while the manager does not answer, is routed by Serve's default
power-of-two-choices router, which also stays the fallback when the chosen replica's
queue is full.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ray import serve
from ray.serve._private.request_router import PowerOfTwoChoicesRequestRouter
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter
from ray.serve.request_router import (
    LocalityMixin,
    MultiplexMixin,
    PendingRequest,
    ReplicaID,
    RequestRouter,
    RunningReplica,
)

from kv_partition.affinity import choose

logger = logging.getLogger("ray.serve")

CONNECT_TIMEOUT_S = 5.0


class PrefixAffinityRouter(LocalityMixin, MultiplexMixin, RequestRouter):
    # Not FIFOMixin (which Serve's default router has): it hands the replica chosen for one
    # request to whichever request waits longest, which would undo every choice made here.

    # Serve passes request_router_kwargs as keywords to a `**kwargs` method; naming them
    # here (as Serve's own custom-router examples do) narrows what the base declares.
    def initialize_state(  # ty: ignore[incompatible-method-override]
        self,
        manager_deployment: str = "KVCacheManager",
        route_timeout_ms: float = 50.0,
        hint_ttl_ms: float = 500.0,
        manager_retry_s: float = 5.0,
        max_imbalance_requests: int = 8,
    ):
        self._manager_name = manager_deployment
        self._manager = None
        self._timeout_s = route_timeout_ms / 1000
        self._hint_ttl_s = hint_ttl_ms / 1000
        self._retry_s = manager_retry_s
        self._max_imbalance = max_imbalance_requests
        self._hints: dict[str, tuple[float, dict[str, int] | None]] = {}
        self._asking: dict[str, asyncio.Future] = {}
        self._manager_down_until = 0.0
        self._decisions = Counter(
            "kv_route_decisions_total",
            description="Model requests routed by prefix affinity, by reason: prefix (a holder), placed (home "
            "replica), least_loaded, or default (no tenant prefix, or the manager did not answer).",
            tag_keys=("reason",),
        )

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        # Serve's default choice, borrowed without its FIFOMixin (see the class comment).
        default = PowerOfTwoChoicesRequestRouter.choose_replicas
        fallback = await default(self, candidate_replicas, pending_request)  # ty: ignore[invalid-argument-type]
        tenant = pending_request.kwargs.get("tenant") if pending_request is not None else None
        if not tenant or not fallback:
            return fallback
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        holders = await self._holders(tenant, list(by_id))
        if holders is None:
            self._decisions.inc(tags={"reason": "default"})
            return fallback
        cache = self._replica_queue_len_cache
        loads = {rid: cache.get(r.replica_id) or 0 for rid, r in by_id.items()}
        hint = choose(tenant, holders, loads, self._max_imbalance)
        self._decisions.inc(tags={"reason": hint.reason})
        if hint.replica is None:
            return fallback
        return [[by_id[hint.replica]], *fallback]

    async def _holders(self, tenant: str, replicas: list[str]) -> dict[str, int] | None:
        now = time.monotonic()
        cached = self._hints.get(tenant)
        if cached is not None and cached[0] > now:
            return cached[1]
        if now < self._manager_down_until:
            return None
        # Concurrent requests of one tenant share one question.
        if tenant not in self._asking:
            self._asking[tenant] = asyncio.ensure_future(self._ask(tenant, replicas))
        try:
            return await asyncio.shield(self._asking[tenant])
        except Exception as e:  # slow, restarting or gone: affinity waits, requests do not
            if time.monotonic() >= self._manager_down_until:
                logger.warning("KV-cache manager did not answer (%r); default routing for %.0f s", e, self._retry_s)
                self._manager_down_until = time.monotonic() + self._retry_s
                self._manager = None
            return None
        finally:
            self._asking.pop(tenant, None)

    async def _ask(self, tenant: str, replicas: list[str]) -> dict[str, int] | None:
        timeout_s = self._timeout_s
        if self._manager is None:
            self._manager = await asyncio.wait_for(self._connect(), CONNECT_TIMEOUT_S)
            # A new handle's first call waits until it learns the manager's replica.
            timeout_s = CONNECT_TIMEOUT_S
        holders = await asyncio.wait_for(self._manager.holders.remote(tenant, replicas), timeout_s)
        self._hints[tenant] = (time.monotonic() + self._hint_ttl_s, holders)
        return holders

    async def _connect(self) -> DeploymentHandle:
        def connect() -> DeploymentHandle:
            # options() initializes the handle: it builds the handle's own request router.
            return serve.get_deployment_handle(self._manager_name, self._deployment_id.app_name).options()

        try:
            # Routers on a shared loop thread (Serve's default): a handle's first use waits
            # on that loop, this one, for its router to start, so it must not run here.
            return await asyncio.to_thread(connect)
        except RuntimeError:
            # Routers on the replica's own loop (Serve's throughput mode): a handle can only
            # be built on a running loop, and this one does not wait for itself.
            return connect()

    def update_replicas(self, replicas: list[RunningReplica]) -> None:
        before = set(self._replica_id_set)
        super().update_replicas(replicas)
        self._forget(before - set(self._replica_id_set))

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self._forget({replica_id})

    def _forget(self, gone: set[ReplicaID]) -> None:
        if not gone:
            return
        self._hints.clear()
        if self._manager is None:  # not connected yet: nothing to correct
            return
        try:  # fire and forget: a lost message only leaves a stale entry the TTL clears
            self._manager.forget.remote([r.unique_id for r in gone])
        except Exception as e:
            logger.info("could not tell the KV-cache manager about gone replicas: %s", type(e).__name__)
