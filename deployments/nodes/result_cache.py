"""The edge router's result cache: answers by tenant, text digest and model version."""

from __future__ import annotations

import hashlib

from deployments.api import Ticket
from deployments.config import EdgeConfig
from policies.cache import LruTtlCache

CacheKey = tuple[str, bytes, str]  # tenant, text digest, model version
CachedAnswer = tuple[str, float]  # label, confidence
# Per cache entry beyond its strings: the key and value tuples, the digest, the float, the
# OrderedDict node (measured with sys.getsizeof on CPython 3.11, rounded up).
CACHE_ENTRY_OVERHEAD_BYTES = 400


def cache_key(ticket: Ticket, model_version: str) -> CacheKey:
    """Tenants never share answers; a model version only ever serves its own. The text is
    kept as a digest: a 10,000-character ticket costs the cache 16 bytes, not 10,000."""
    return (ticket.tenant or "", hashlib.blake2b(ticket.text.encode(), digest_size=16).digest(), model_version)


def cache_entry_bytes(key: CacheKey, value: CachedAnswer) -> int:
    return CACHE_ENTRY_OVERHEAD_BYTES + len(key[0]) + len(key[2]) + len(value[0])


def result_cache(config: EdgeConfig) -> LruTtlCache[CacheKey, CachedAnswer]:
    return LruTtlCache(config.cache_max_entries, config.cache_ttl_s, config.cache_max_bytes, cache_entry_bytes)
