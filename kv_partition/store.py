"""Prefix block store: which KV blocks of shared prompt prefixes are held, within a budget.

Blocks are named as vLLM names them for prefix caching (`hash_block_tokens` in
`vllm/v1/core/kv_cache_utils.py`): each full block's hash chains its parent's, so a hash
stands for the whole prefix up to it. The store keeps blocks per layer range with each
range's bytes per block, in two tiers: hot (blocks whose share of lookups reached the
hot-key threshold) and cold. As in LMCache (`lmcache/v1/storage_backend/cache_policy/`),
an eviction policy only proposes candidates and the store evicts; the budget is checked
before every insert and is never exceeded. Time is passed in (`now`), never read.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

ROOT_HASH = b"\x00" * 32


def block_hashes(token_ids: Sequence[int], block_size: int, extra_key: object = None) -> list[bytes]:
    """Chained hashes of the full blocks of `token_ids` (a partial last block has none);
    `extra_key` separates namespaces (e.g. a model version or a LoRA), as vLLM's extra keys do."""
    hashes: list[bytes] = []
    parent = ROOT_HASH
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        block = tuple(token_ids[start : start + block_size])
        parent = hashlib.sha256(pickle.dumps((parent, block, extra_key), protocol=5)).digest()
        hashes.append(parent)
    return hashes


class EvictionPolicy(Protocol):
    """Orders keys for eviction; the store tells it about every put, hit and removal."""

    def on_put(self, key: bytes, now: float) -> None: ...

    def on_hit(self, key: bytes, now: float) -> None: ...

    def on_remove(self, key: bytes) -> None: ...

    def candidates(self, now: float) -> Iterator[bytes]:
        """Keys in the order they should go, every key at most once."""
        ...


class LruPolicy:
    """Least recently put or hit first."""

    def __init__(self):
        self._order: OrderedDict[bytes, float] = OrderedDict()

    def on_put(self, key: bytes, now: float) -> None:
        self._order[key] = now
        self._order.move_to_end(key)

    def on_hit(self, key: bytes, now: float) -> None:
        if key in self._order:
            self.on_put(key, now)

    def on_remove(self, key: bytes) -> None:
        self._order.pop(key, None)

    def candidates(self, now: float) -> Iterator[bytes]:
        return iter(list(self._order))


class LruTtlPolicy(LruPolicy):
    """LRU, but a key unused for `ttl_s` goes first (the seeds' LRU with TTL 3600 s)."""

    def __init__(self, ttl_s: float):
        super().__init__()
        self.ttl_s = ttl_s

    def expired(self, now: float) -> list[bytes]:
        return [k for k, used in self._order.items() if now - used >= self.ttl_s]

    def candidates(self, now: float) -> Iterator[bytes]:
        expired = self.expired(now)
        gone = set(expired)
        return iter(expired + [k for k in self._order if k not in gone])


@dataclass
class Block:
    size_bytes: int
    added_at: float
    lookups_at_add: int  # store-wide lookups when it came: its share counts from there
    hits: int = 0
    hot: bool = False


@dataclass
class RangeStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    refused: int = 0  # blocks larger than the whole budget


@dataclass
class RangeStore:
    """One layer range's blocks."""

    budget_bytes: int
    block_bytes: int
    policy: EvictionPolicy
    blocks: dict[bytes, Block] = field(default_factory=dict)
    used_bytes: int = 0
    stats: RangeStats = field(default_factory=RangeStats)


class BlockStore:
    """Blocks per layer range, hot/cold tiers, eviction by policy within each budget."""

    def __init__(self, ranges: dict[str, RangeStore], hot_threshold: float = 0.3, hot_min_hits: int = 3):
        if not 0 < hot_threshold <= 1:
            raise ValueError(f"hot_threshold={hot_threshold}: must be in (0, 1]")
        self._ranges = ranges
        self._hot_threshold = hot_threshold
        self._hot_min_hits = hot_min_hits
        self._lookups = 0

    def lookup(self, hashes: Sequence[bytes], now: float) -> int:
        """Length in blocks of the longest held prefix (in every range); hits count toward
        hotness, and expired blocks (TTL) are dropped first."""
        self._lookups += 1
        self.expire(now)
        held = self.held_prefix(hashes)
        for r in self._ranges.values():
            r.stats.hits += held
            r.stats.misses += len(hashes) - held
            # Deepest block first: its parent ends up the more recent, so leaves go before
            # the prefixes they hang on (as vLLM frees a sequence's tail blocks first).
            for h in reversed(hashes[:held]):
                block = r.blocks[h]
                block.hits += 1
                r.policy.on_hit(h, now)
                self._maybe_promote(block)
        return held

    def held_prefix(self, hashes: Sequence[bytes]) -> int:
        """Like `lookup` without counting it: blocks of the longest held prefix."""
        held = 0
        for h in hashes:
            if not all(h in r.blocks for r in self._ranges.values()):
                break
            held += 1
        return held

    def put(self, hashes: Sequence[bytes], now: float) -> int:
        """Stores the blocks not held yet, evicting as the policy proposes; returns how many
        were added to every range."""
        self.expire(now)
        added = 0
        for h in hashes:
            stored = [self._put_one(r, h, now) for r in self._ranges.values()]
            added += all(stored)
        for r in self._ranges.values():
            for h in reversed(hashes):
                r.policy.on_hit(h, now)
        return added

    def expire(self, now: float) -> int:
        """Drops blocks whose policy says their TTL ran out."""
        dropped = 0
        for r in self._ranges.values():
            if isinstance(r.policy, LruTtlPolicy):
                for key in r.policy.expired(now):
                    self._evict(r, key)
                    dropped += 1
        return dropped

    def hot_keys(self) -> list[bytes]:
        """Hot blocks (in every range), most hit first: what a fresh replica should warm up."""
        first = next(iter(self._ranges.values()))
        hot = [
            (b.hits, h)
            for h, b in first.blocks.items()
            if all(h in r.blocks and r.blocks[h].hot for r in self._ranges.values())
        ]
        return [h for _, h in sorted(hot, reverse=True)]

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {
            name: {
                "blocks": len(r.blocks),
                "used_bytes": r.used_bytes,
                "budget_bytes": r.budget_bytes,
                "hot": sum(b.hot for b in r.blocks.values()),
                **vars(r.stats),
            }
            for name, r in self._ranges.items()
        }

    def _share(self, block: Block) -> float:
        return block.hits / max(1, self._lookups - block.lookups_at_add)

    def _maybe_promote(self, block: Block) -> None:
        if not block.hot and block.hits >= self._hot_min_hits and self._share(block) >= self._hot_threshold:
            block.hot = True

    def _put_one(self, r: RangeStore, key: bytes, now: float) -> bool:
        if key in r.blocks:
            return True
        if r.block_bytes > r.budget_bytes:
            r.stats.refused += 1
            return False
        if r.used_bytes + r.block_bytes > r.budget_bytes:
            # Cold blocks go before hot ones, each tier in the policy's order.
            order = list(r.policy.candidates(now))
            for key_out in [k for k in order if not r.blocks[k].hot] + [k for k in order if r.blocks[k].hot]:
                self._evict(r, key_out)
                r.stats.evictions += 1
                if r.used_bytes + r.block_bytes <= r.budget_bytes:
                    break
        r.blocks[key] = Block(r.block_bytes, now, self._lookups)
        r.used_bytes += r.block_bytes
        r.policy.on_put(key, now)
        return True

    @staticmethod
    def _evict(r: RangeStore, key: bytes) -> None:
        block = r.blocks.pop(key, None)
        if block is not None:
            r.used_bytes -= block.size_bytes
            r.policy.on_remove(key)
