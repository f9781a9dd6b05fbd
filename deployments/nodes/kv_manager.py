"""The KV-cache manager: one actor that knows which model replica holds which prompt prefix.

Model replicas join with their prefixes (one per tenant instruction) and cache size, get
the hot prefixes to warm up, and then report in batches what their requests put in the
cache and what vLLM's prefix cache served. Request routers ask it who holds a prefix.
Nothing waits on it for long: losing it costs affinity (routers fall back to Serve's
default) and, after its restart, the replicas' next reports rebuild the registry.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ray.serve.metrics import Counter

from deployments.config import KVCacheConfig
from deployments.metrics.held_gauge import HeldGauge
from kv_partition.registry import PrefixRegistry
from policies.window import nearest_rank

TTFT_SAMPLES = 20_000  # most recent time-to-first-token readings kept for snapshot()

DEFAULT_OPTIONS = {
    "name": "KVCacheManager",
    "num_replicas": 1,
    "max_ongoing_requests": 4096,
    "ray_actor_options": {"num_cpus": 0},
}


@dataclass(frozen=True)
class PrefixUse:
    """One request's prompt started with the prefix `key` on the reporting replica."""

    key: str
    hit: bool  # vLLM's prefix cache served every full block of the prefix
    prompt_tokens: int
    cached_tokens: int
    ttft_ms: float


class KVCacheManager:
    def __init__(self, config: KVCacheConfig, clock: Callable[[], float] = time.monotonic):
        self._registry = PrefixRegistry(config.registry)
        self._clock = clock
        self._prefixes: dict[str, tuple[int, ...]] = {}
        self._keys: dict[tuple[int, ...], str] = {}
        self._shared: dict[str, int] = {}
        self._totals = {"uses": 0, "hits": 0, "prompt_tokens": 0, "cached_tokens": 0, "warmed": 0}
        self._per_replica: dict[str, dict[str, dict[str, int]]] = {}
        self._ttft_ms: collections.deque[tuple[bool, float]] = collections.deque(maxlen=TTFT_SAMPLES)
        self._uses = Counter(
            "kv_prefix_requests_total",
            description="Model requests with a tenant prefix, by whether vLLM's prefix cache held all of it.",
            tag_keys=("result",),
        )
        self._tokens = Counter(
            "kv_prompt_tokens_total",
            description="Prompt tokens of those requests, by computed or cached.",
            tag_keys=("source",),
        )
        self._warmed = Counter("kv_warmup_prefixes_total", description="Prefixes fresh replicas computed at start.")
        self._hot = HeldGauge("kv_hot_prefixes", description="Prefixes the registry counts as hot.")
        self._replicas = HeldGauge("kv_tracked_replicas", description="Model replicas the registry tracks.")

    def join(self, replica: str, prefixes: dict[str, list[int]], capacity_tokens: int) -> list[str]:
        """A replica started (or the manager restarted): its prefixes and cache size; answers
        the keys of hot prefixes it should compute before taking traffic."""
        known = dict(self._prefixes)
        for key, ids in prefixes.items():
            self._prefixes[key] = tuple(ids)
            self._keys[tuple(ids)] = key
        if self._prefixes != known:  # replicas usually join with the same prefixes: compare pairs once
            self._shared = self._registry.shared_blocks(self._prefixes)
        self._registry.join(replica, capacity_tokens)
        self._replicas.set(self._registry.replica_count())
        return [self._keys[ids] for ids in map(tuple, self._registry.warmup(replica)) if ids in self._keys]

    def report(self, replica: str, uses: list[PrefixUse], warmed: list[str]) -> bool:
        """False: this manager does not know the replica (it restarted); the replica joins again."""
        if not self._registry.knows(replica):
            return False
        now = self._clock()
        for key in warmed:
            if key in self._prefixes:
                self._registry.warmed(replica, self._prefixes[key], now)
                self._warmed.inc()
                self._totals["warmed"] += 1
        per_key = self._per_replica.setdefault(replica, {})
        for use in uses:
            if use.key not in self._prefixes:
                continue
            self._registry.report(replica, self._prefixes[use.key], now)
            self._uses.inc(tags={"result": "hit" if use.hit else "miss"})
            for source, n in (("cached", use.cached_tokens), ("computed", use.prompt_tokens - use.cached_tokens)):
                if n > 0:  # Ray's counters refuse 0
                    self._tokens.inc(n, tags={"source": source})
            for counts in (self._totals, per_key.setdefault(use.key, {"uses": 0, "hits": 0})):
                counts["uses"] += 1
                counts["hits"] += use.hit
            self._ttft_ms.append((use.hit, use.ttft_ms))
            self._totals["prompt_tokens"] += use.prompt_tokens
            self._totals["cached_tokens"] += use.cached_tokens
        self._hot.set(self._registry.hot_prefixes())
        return True

    def holders(self, key: str, replicas: list[str]) -> dict[str, int] | None:
        """Blocks of the prefix `key` each of `replicas` holds (those holding any); None when
        `key` names no known prefix, so affinity cannot help it."""
        ids = self._prefixes.get(key)
        if ids is None:
            return None
        # Blocks every tenant's prompt starts with (the common instruction) are on every
        # replica: only holding the tenant's own part makes a replica a holder.
        shared = self._shared.get(key, 0)
        held = self._registry.holders(ids, replicas, self._clock())
        return {r: n - shared for r, n in held.items() if n > shared}

    def forget(self, replicas: list[str]) -> None:
        for replica in replicas:
            self._registry.forget(replica)
            self._per_replica.pop(replica, None)
        self._replicas.set(self._registry.replica_count())

    def snapshot(self) -> dict:
        """Registry state and hit counts since start: per replica, which prefix keys it served."""
        return {
            **self._registry.snapshot(),
            "prefix_keys": sorted(self._prefixes),
            "totals": dict(self._totals),
            "served": self._per_replica,
            "ttft_ms": {
                "all": _quantiles(t for _, t in self._ttft_ms),
                "hit": _quantiles(t for hit, t in self._ttft_ms if hit),
                "miss": _quantiles(t for hit, t in self._ttft_ms if not hit),
            },
        }

    async def ping(self) -> str:
        return "ok"


def _quantiles(values: Iterable[float]) -> dict[str, float | int]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "p50": round(nearest_rank(ordered, 0.5), 1),
        "p99": round(nearest_rank(ordered, 0.99), 1),
    }
