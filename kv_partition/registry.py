"""The KV-cache manager's state: which replica holds which prompt prefix, which prefixes are
hot, where a request should go, and what a fresh replica should warm up.

Plain Python: the manager actor is glue around one `PrefixRegistry`. Each replica gets a
`BlockStore` the size of its prefix cache (what vLLM would hold, estimated from what it
was sent); one more store over all traffic decides hotness.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kv_partition.store import (
    BlockStore,
    EvictionPolicy,
    LruTtlPolicy,
    RangeStore,
    block_hashes,
)


@dataclass(frozen=True)
class RegistryConfig:
    block_size_tokens: int = 16  # vLLM's default block size
    replica_blocks: int = 4096  # prefix-cache blocks one replica holds
    hot_threshold: float = 0.3  # the seeds' hot-key share of lookups
    hot_min_hits: int = 3
    ttl_s: float = 3600.0  # the seeds' LRU TTL
    max_imbalance: int = 8  # requests in flight a prefix-holding replica may have above the least loaded one
    warmup_prefixes: int = 8  # hot prefixes a fresh replica is told to compute
    remembered_prefixes: int = 256  # prompts kept (as token ids) for warm-up


@dataclass(frozen=True)
class RouteHint:
    replica: str | None  # None: no preference, let the default router pick
    matched_blocks: int
    reason: str  # prefix, least_loaded, no_match


class PrefixRegistry:
    def __init__(self, config: RegistryConfig, policy: Callable[[], EvictionPolicy] | None = None):
        self._config = config
        self._policy = policy or (lambda: LruTtlPolicy(config.ttl_s))
        self._replicas: dict[str, BlockStore] = {}
        self._traffic = self._new_store(hot=True)
        # Last block hash of a reported prefix -> its token ids, most recent last.
        self._prompts: OrderedDict[bytes, tuple[int, ...]] = OrderedDict()

    def _new_store(self, hot: bool = False) -> BlockStore:
        c = self._config
        ranges = {"all": RangeStore(budget_bytes=c.replica_blocks, block_bytes=1, policy=self._policy())}
        return BlockStore(ranges, hot_threshold=c.hot_threshold, hot_min_hits=c.hot_min_hits if hot else 1)

    def hashes(self, token_ids: Sequence[int]) -> list[bytes]:
        return block_hashes(token_ids, self._config.block_size_tokens)

    def report(self, replica: str, prefix_ids: Sequence[int], now: float) -> None:
        """`replica` computed a prompt starting with `prefix_ids` (so its cache holds it)."""
        hashes = self.hashes(prefix_ids)
        if not hashes:
            return
        store = self._replicas.setdefault(replica, self._new_store())
        store.lookup(hashes, now)
        store.put(hashes, now)
        self._traffic.lookup(hashes, now)
        self._traffic.put(hashes, now)
        last = hashes[-1]
        self._prompts[last] = tuple(prefix_ids[: len(hashes) * self._config.block_size_tokens])
        self._prompts.move_to_end(last)
        while len(self._prompts) > self._config.remembered_prefixes:
            self._prompts.popitem(last=False)

    def route(self, prefix_ids: Sequence[int], loads: dict[str, int], now: float) -> RouteHint:
        """The replica among `loads` (replica -> requests in flight) holding the longest part
        of the prefix, unless it is overloaded against the least loaded one."""
        if not loads:
            return RouteHint(None, 0, "no_match")
        hashes = self.hashes(prefix_ids)
        matched = {r: self._held(r, hashes, now) for r in loads}
        best = max(loads, key=lambda r: (matched[r], -loads[r]))
        least = min(loads, key=lambda r: loads[r])
        if matched[best] == 0:
            return RouteHint(least, 0, "no_match")
        if loads[best] - loads[least] > self._config.max_imbalance:
            return RouteHint(least, matched[least], "least_loaded")
        return RouteHint(best, matched[best], "prefix")

    def _held(self, replica: str, hashes: list[bytes], now: float) -> int:
        store = self._replicas.get(replica)
        if store is None:
            return 0
        store.expire(now)
        return store.held_prefix(hashes)

    def warmup(self, replica: str) -> list[tuple[int, ...]]:
        """Token ids of the hot prefixes `replica` does not hold yet, hottest first."""
        hot = self._traffic.hot_keys()
        held = self._replicas.get(replica)
        out = []
        for h in hot:
            if h in self._prompts and (held is None or held.held_prefix([h]) == 0):
                out.append(self._prompts[h])
            if len(out) == self._config.warmup_prefixes:
                break
        return out

    def forget(self, replica: str) -> None:
        """A replica went away: its cache went with it."""
        self._replicas.pop(replica, None)

    def snapshot(self) -> dict:
        return {
            "replicas": {r: s.snapshot()["all"] for r, s in self._replicas.items()},
            "traffic": self._traffic.snapshot()["all"],
            "hot_prefixes": len(self._traffic.hot_keys()),
        }
