"""The KV-cache manager's state: which replica holds which prompt prefix, which prefixes are
hot, where a request should go, and what a fresh replica should warm up.

Plain Python: the manager actor is glue around one `PrefixRegistry`. Each replica gets a
`BlockStore` the size of its KV cache (what vLLM would hold, estimated from what it was
sent); one more store over all traffic decides hotness.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kv_partition.affinity import RouteHint, choose
from kv_partition.store import (
    BlockStore,
    EvictionPolicy,
    LruTtlPolicy,
    RangeStore,
    block_hashes,
)


class RegistryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    block_size_tokens: int = Field(16, gt=0, description="tokens per KV block (vLLM's default block size)")
    replica_blocks: int = Field(
        4096, gt=0, description="KV blocks assumed per replica when the replica does not say how many it has"
    )
    hot_threshold: float = Field(
        0.3, gt=0, le=1, description="share of lookups that makes a prefix hot (the seeds' 0.3)"
    )
    hot_min_hits: int = Field(3, ge=1, description="hits a prefix needs before it can be hot")
    ttl_s: float = Field(3600.0, gt=0, description="a prefix unused this long is assumed evicted (the seeds' LRU TTL)")
    max_imbalance_requests: int = Field(
        8, ge=0, description="requests in flight a prefix-holding replica may have above the least loaded one"
    )
    warmup_prefixes: int = Field(8, ge=0, description="hot prefixes a fresh replica is told to compute")
    remembered_prefixes: int = Field(256, gt=0, description="prefixes kept (as token ids) for warm-up")


class PrefixRegistry:
    def __init__(self, config: RegistryConfig, policy: Callable[[], EvictionPolicy] | None = None):
        self._config = config
        self._policy = policy or (lambda: LruTtlPolicy(config.ttl_s))
        self._replicas: dict[str, BlockStore] = {}
        self._traffic = self._new_store(config.replica_blocks, hot=True)
        # Last block hash of a reported prefix -> its token ids, most recent last.
        self._prompts: OrderedDict[bytes, tuple[int, ...]] = OrderedDict()

    def _new_store(self, blocks: int, hot: bool = False) -> BlockStore:
        c = self._config
        ranges = {"all": RangeStore(budget_bytes=blocks, block_bytes=1, policy=self._policy())}
        return BlockStore(ranges, hot_threshold=c.hot_threshold, hot_min_hits=c.hot_min_hits if hot else 1)

    def hashes(self, token_ids: Sequence[int]) -> list[bytes]:
        return block_hashes(token_ids, self._config.block_size_tokens)

    def join(self, replica: str, capacity_tokens: int | None = None) -> None:
        """A replica (re)started with an empty KV cache holding `capacity_tokens` tokens."""
        blocks = capacity_tokens // self._config.block_size_tokens if capacity_tokens else 0
        self._replicas[replica] = self._new_store(blocks or self._config.replica_blocks)

    def knows(self, replica: str) -> bool:
        return replica in self._replicas

    def report(self, replica: str, prefix_ids: Sequence[int], now: float) -> None:
        """`replica` computed a prompt starting with `prefix_ids` (so its cache holds it)."""
        hashes = self.hashes(prefix_ids)
        if not hashes:
            return
        if replica not in self._replicas:
            self.join(replica)
        store = self._replicas[replica]
        store.lookup(hashes, now)
        store.put(hashes, now)
        self._traffic.lookup(hashes, now)
        self._traffic.put(hashes, now)
        last = hashes[-1]
        self._prompts[last] = tuple(prefix_ids)
        self._prompts.move_to_end(last)
        while len(self._prompts) > self._config.remembered_prefixes:
            self._prompts.popitem(last=False)

    def warmed(self, replica: str, prefix_ids: Sequence[int], now: float) -> None:
        """`replica` computed the prefix to warm its cache: held, but no traffic counted."""
        hashes = self.hashes(prefix_ids)
        if hashes and replica in self._replicas:
            self._replicas[replica].put(hashes, now)

    def shared_blocks(self, prefixes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Per prefix, how many of its leading blocks some other prefix starts with too."""
        chains = {k: self.hashes(ids) for k, ids in prefixes.items()}

        def common(a: list[bytes], b: list[bytes]) -> int:
            return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

        return {k: max((common(c, o) for j, o in chains.items() if j != k), default=0) for k, c in chains.items()}

    def holders(self, prefix_ids: Sequence[int], replicas: Sequence[str], now: float) -> dict[str, int]:
        """Blocks of the prefix each of `replicas` holds, for those holding any."""
        hashes = self.hashes(prefix_ids)
        held = {r: self._held(r, hashes, now) for r in replicas}
        return {r: n for r, n in held.items() if n}

    def route(self, prefix_ids: Sequence[int], loads: Mapping[str, int], now: float) -> RouteHint:
        """The replica among `loads` (replica -> requests in flight) for this prefix: see
        `affinity.choose`; the prefix's last block hash is its placement key."""
        hashes = self.hashes(prefix_ids)
        key = hashes[-1].hex() if hashes else ""
        return choose(key, self.holders(prefix_ids, list(loads), now), loads, self._config.max_imbalance_requests)

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

    def replica_count(self) -> int:
        return len(self._replicas)

    def hot_prefixes(self) -> int:
        """Hot prefixes, not blocks: a prefix is named by its last block."""
        return sum(h in self._prompts for h in self._traffic.hot_keys())

    def forget(self, replica: str) -> None:
        """A replica went away: its cache went with it."""
        self._replicas.pop(replica, None)

    def snapshot(self) -> dict[str, Any]:
        return {
            "replicas": {r: s.snapshot()["all"] for r, s in self._replicas.items()},
            "traffic": self._traffic.snapshot()["all"],
            "hot_prefixes": self.hot_prefixes(),
        }
