"""Prefix-affinity decision, the KV-cache manager's bookkeeping and the model replica's
reporter, without Ray (small stand-ins for the handle and the engine)."""

from __future__ import annotations

import asyncio
import collections

from deployments.config import KVCacheConfig
from deployments.engines import Prediction
from deployments.nodes.kv_manager import KVCacheManager, PrefixUse
from deployments.nodes.kv_reporter import KVReporter
from kv_partition.affinity import choose, home_replica
from tests.harness import as_handle

REPLICAS = ["r1", "r2", "r3"]


def test_holder_wins_over_an_idle_replica():
    hint = choose("acme", {"r2": 5}, {"r1": 0, "r2": 3, "r3": 0}, max_imbalance_requests=8)
    assert (hint.replica, hint.matched_blocks, hint.reason) == ("r2", 5, "prefix")


def test_the_longest_held_prefix_wins():
    assert choose("acme", {"r1": 2, "r3": 6}, dict.fromkeys(REPLICAS, 0), 8).replica == "r3"


def test_among_equal_holders_the_home_replica_keeps_the_tenant():
    loads = {"r1": 0, "r2": 4, "r3": 2}
    picks = {choose(f"t{i}", dict.fromkeys(REPLICAS, 3), loads, 8).replica for i in range(40)}
    assert picks == set(REPLICAS)  # not always the least loaded: each tenant its own home
    assert all(
        choose(f"t{i}", dict.fromkeys(REPLICAS, 3), loads, 8).replica == home_replica(f"t{i}", REPLICAS)
        for i in range(40)
    )


def test_overloaded_choice_gives_way_to_the_least_loaded():
    hint = choose("acme", {"r2": 5}, {"r1": 1, "r2": 10, "r3": 2}, max_imbalance_requests=8)
    assert (hint.replica, hint.reason) == ("r1", "least_loaded")
    assert choose("acme", {"r2": 5}, {"r1": 1, "r2": 9, "r3": 2}, 8).replica == "r2"


def test_unheld_prefixes_are_placed_by_rendezvous_hashing():
    keys = [f"tenant-{i}" for i in range(300)]
    placed = {k: choose(k, {}, dict.fromkeys(REPLICAS, 0), 8) for k in keys}
    assert all(h.reason == "placed" for h in placed.values())
    shares = collections.Counter(h.replica for h in placed.values())
    assert min(shares.values()) > 60  # spread over all replicas (100 each on average)
    # Removing a replica moves only the prefixes that lived there.
    after = {k: choose(k, {}, {"r1": 0, "r2": 0}, 8).replica for k in keys}
    assert all(after[k] == h.replica for k, h in placed.items() if h.replica != "r3")


def test_no_replicas_no_preference():
    assert choose("acme", {}, {}, 8).replica is None


# 20 full blocks of 16 and a partial one, as real prefixes end anywhere.
TENANT_IDS = {"acme": list(range(100, 425)), "globex": list(range(500, 825))}


def manager(**registry) -> tuple[KVCacheManager, list[float]]:
    clock = [0.0]
    return KVCacheManager(KVCacheConfig(registry=registry), clock=lambda: clock[0]), clock


def use(key: str, hit: bool = True) -> PrefixUse:
    return PrefixUse(key, hit, 340, 320 if hit else 0, 5.0)


def test_manager_answers_holders_from_reports_and_counts_hits():
    m, _ = manager()
    assert m.join("r1", TENANT_IDS, capacity_tokens=10_000) == []
    m.join("r2", TENANT_IDS, capacity_tokens=10_000)
    assert m.holders("acme", ["r1", "r2"]) == {}
    assert m.report("r1", [use("acme", hit=False), use("acme"), use("acme")], warmed=[])
    assert m.holders("acme", ["r1", "r2"]) == {"r1": 20}
    assert m.holders("initech", ["r1"]) is None  # no prefix of its own: default routing
    snap = m.snapshot()
    assert snap["totals"]["uses"] == 3 and snap["totals"]["hits"] == 2
    assert snap["served"] == {"r1": {"acme": {"uses": 3, "hits": 2}}}


def test_manager_after_restart_asks_replicas_to_join_again():
    m, _ = manager()
    assert m.report("r1", [use("acme")], warmed=[]) is False  # a fresh manager: unknown replica
    m.join("r1", TENANT_IDS, 10_000)
    assert m.report("r1", [use("acme")], warmed=[]) is True


def test_a_fresh_replica_is_told_the_hot_prefixes_and_they_count_as_held():
    m, clock = manager(hot_min_hits=3)
    m.join("r1", TENANT_IDS, 10_000)
    for t in range(6):
        clock[0] = t
        m.report("r1", [use("acme")], warmed=[])
    m.report("r1", [use("globex")], warmed=[])
    assert m.join("r2", TENANT_IDS, 10_000) == ["acme"]  # hot; globex seen once is not
    m.report("r2", [], warmed=["acme"])
    assert m.holders("acme", ["r1", "r2"]) == {"r1": 20, "r2": 20}
    assert m.snapshot()["totals"]["warmed"] == 1


def test_forgotten_replicas_hold_nothing():
    m, _ = manager()
    m.join("r1", TENANT_IDS, 10_000)
    m.report("r1", [use("acme")], warmed=[])
    m.forget(["r1"])
    assert m.holders("acme", ["r1"]) == {}


class Remote:
    """A DeploymentHandle method: .remote() gives an awaitable."""

    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        async def call():
            return self.fn(*args)

        return call()


class ManagerHandle:
    def __init__(self, m: KVCacheManager):
        self.join = Remote(m.join)
        self.report = Remote(m.report)


class SmallEngine:
    def __init__(self):
        self.warmed = []

    def prefixes(self):
        return TENANT_IDS

    def kv_cache(self):
        return 100, 128  # vLLM's CPU block size: 325 prefix tokens -> 256 in full blocks

    async def warm(self, prefix_ids, request_id):
        self.warmed.append(len(prefix_ids))


def test_reporter_warms_hot_prefixes_then_reports_hits_by_full_blocks():
    m, _ = manager(hot_min_hits=1)
    m.join("old", TENANT_IDS, 10_000)
    for _ in range(3):
        m.report("old", [use("globex")], warmed=[])
    engine = SmallEngine()
    config = KVCacheConfig(report_interval_ms=10)

    async def scenario():
        reporter = KVReporter(as_handle(ManagerHandle(m)), config, engine, "new")
        await reporter.start()
        reporter.record(Prediction("refund", 0.9, "acme", 400, 256, 3.0))  # every full block cached
        reporter.record(Prediction("refund", 0.9, "acme", 400, 128, 9.0))  # one block short: a miss
        reporter.record(Prediction("refund", 0.9, None, 100, 0, 1.0))  # default prefix: not reported
        await asyncio.sleep(0.1)
        reporter.stop()

    asyncio.run(scenario())
    assert engine.warmed == [325]  # globex, hot on the other replica
    assert m.snapshot()["served"]["new"] == {"acme": {"uses": 2, "hits": 1}}
    assert m.holders("globex", ["new"]) == {"new": 20}


def test_only_the_tenant_part_of_a_prefix_makes_a_holder():
    base = list(range(9000, 9160))  # 10 blocks every tenant's prompt starts with
    m, _ = manager()
    m.join("r1", {"acme": base + TENANT_IDS["acme"], "globex": base + TENANT_IDS["globex"]}, 10_000)
    m.join("r2", {}, 10_000)
    m.report("r2", [use("globex")], warmed=[])  # r2 holds the common 10 blocks, not acme's own
    assert m.holders("acme", ["r1", "r2"]) == {}
    m.report("r1", [use("acme")], warmed=[])
    assert m.holders("acme", ["r1", "r2"]) == {"r1": 20}


def test_an_idle_reporter_rejoins_a_restarted_manager_within_an_interval():
    m, _ = manager()
    handle = ManagerHandle(m)
    config = KVCacheConfig(report_interval_ms=10)

    async def scenario():
        reporter = KVReporter(as_handle(handle), config, SmallEngine(), "r1")
        await reporter.start()
        reporter.record(Prediction("refund", 0.9, "acme", 400, 256, 3.0))
        await asyncio.sleep(0.05)
        fresh, _ = manager()  # Serve replaced the manager: an empty registry
        handle.join, handle.report = Remote(fresh.join), Remote(fresh.report)
        await asyncio.sleep(0.05)  # no tickets meanwhile
        reporter.stop()
        return fresh

    fresh = asyncio.run(scenario())
    assert m.snapshot()["served"]["r1"] == {"acme": {"uses": 1, "hits": 1}}
    assert "r1" in fresh.snapshot()["replicas"]
