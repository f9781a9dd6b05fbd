"""A bounded map with least-recently-used eviction and a time to live.

Expired entries are not served by `get` but stay until evicted, so a caller whose
fresh source failed can still fall back on them (`get_stale`, HTTP's stale-if-error).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruTtlCache(Generic[K, V]):
    def __init__(self, max_entries: int, ttl_s: float):
        if max_entries <= 0 or ttl_s <= 0:
            raise ValueError(f"max_entries and ttl_s must be > 0, got {max_entries}, {ttl_s}")
        self._max_entries = max_entries
        self._ttl_s = ttl_s
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self.evicted = 0
        self.expired = 0

    def get(self, key: K, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored_at, value = entry
        if now - stored_at >= self._ttl_s:
            self.expired += 1
            return None
        self._entries.move_to_end(key)
        return value

    def get_stale(self, key: K) -> V | None:
        """The entry whatever its age."""
        entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def put(self, key: K, value: V, now: float) -> None:
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
            self.evicted += 1

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
