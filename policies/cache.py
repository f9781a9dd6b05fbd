"""A bounded map with least-recently-used eviction and a time to live, bounded in
entries and, when given a size function, in bytes.

Expired entries are not served by `get` but stay until evicted, so a caller whose
fresh source failed can still fall back on them (`get_stale`, HTTP's stale-if-error).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruTtlCache(Generic[K, V]):
    def __init__(
        self,
        max_entries: int,
        ttl_s: float,
        max_bytes: int | None = None,
        size_of: Callable[[K, V], int] | None = None,
    ):
        if max_entries <= 0 or ttl_s <= 0 or (max_bytes is not None and max_bytes <= 0):
            raise ValueError(f"max_entries, ttl_s and max_bytes must be > 0, got {max_entries}, {ttl_s}, {max_bytes}")
        if (max_bytes is None) != (size_of is None):
            raise ValueError("max_bytes and size_of go together")
        self._max_entries = max_entries
        self._ttl_s = ttl_s
        self._max_bytes = max_bytes
        self._size_of = size_of
        self.bytes = 0
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
        if key in self._entries:
            self.bytes -= self._size(key, self._entries[key][1])
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        self.bytes += self._size(key, value)
        while len(self._entries) > self._max_entries or (self._max_bytes is not None and self.bytes > self._max_bytes):
            old_key, (_, old_value) = self._entries.popitem(last=False)
            self.bytes -= self._size(old_key, old_value)
            self.evicted += 1

    def _size(self, key: K, value: V) -> int:
        return self._size_of(key, value) if self._size_of is not None else 0

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
