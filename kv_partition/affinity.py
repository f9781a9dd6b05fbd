"""Prefix-affinity routing decision: which model replica a request with a known prompt
prefix should go to, given who holds that prefix and how loaded each replica is.

Plain Python: the request router asks the KV-cache manager who holds the prefix and
decides here with its own, fresher view of the replicas' queues.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RouteHint:
    replica: str | None  # None: no preference, let Serve's default router pick
    matched_blocks: int
    reason: str  # prefix: a holder; placed: nobody holds it, its home replica; least_loaded: holder/home overloaded


def home_replica(key: str, replicas: Iterable[str]) -> str:
    """Rendezvous hashing: every router places a prefix nobody holds yet on the same replica,
    without asking anyone, and only the prefixes of a removed replica move. `replicas`: at
    least one."""
    return max(replicas, key=lambda r: hashlib.blake2b(f"{key}\x00{r}".encode(), digest_size=8).digest())


def choose(key: str, holders: Mapping[str, int], loads: Mapping[str, int], max_imbalance_requests: int) -> RouteHint:
    """`holders`: replica -> blocks of the prefix it holds; `loads`: replica -> requests in
    flight, for the replicas that may be chosen. Among the replicas holding the most of the
    prefix (all of them, if none holds any), the prefix's home replica: keeping a tenant on
    one replica lets other copies of its prefix age out and leaves room for other prefixes.
    Never a replica with more than `max_imbalance_requests` over the least loaded one."""
    if not loads:
        return RouteHint(None, 0, "no_replica")
    held = {r: holders.get(r, 0) for r in loads}
    most = max(held.values())
    pick = home_replica(key, [r for r in loads if held[r] == most])
    least = min(loads, key=lambda r: loads[r])
    if loads[pick] - loads[least] > max_imbalance_requests:
        return RouteHint(least, held[least], "least_loaded")
    return RouteHint(pick, most, "prefix" if most else "placed")
