"""The KV-cache manager's registry: routing by held prefix, overload fallback, hot
prefixes for warm-up, TTL and replica loss, on a fake clock."""

from kv_partition.registry import PrefixRegistry, RegistryConfig

TENANT_A = list(range(1000, 1160))  # 10 blocks of 16 tokens
TENANT_B = list(range(2000, 2160))


def registry(**kw) -> PrefixRegistry:
    return PrefixRegistry(RegistryConfig(**kw))


def test_routes_to_the_replica_holding_the_prefix():
    r = registry()
    r.report("r1", TENANT_A, now=0)
    r.report("r2", TENANT_B, now=0)
    hint = r.route(TENANT_A + [7, 8, 9], {"r1": 3, "r2": 0}, now=1)
    assert (hint.replica, hint.matched_blocks, hint.reason) == ("r1", 10, "prefix")
    assert r.route(TENANT_B[:40], {"r1": 0, "r2": 0}, now=1).replica == "r2"


def test_overloaded_holder_loses_to_the_least_loaded():
    r = registry(max_imbalance_requests=8)
    r.report("r1", TENANT_A, now=0)
    hint = r.route(TENANT_A, {"r1": 20, "r2": 11}, now=1)
    assert (hint.replica, hint.reason) == ("r2", "least_loaded")
    assert r.route(TENANT_A, {"r1": 19, "r2": 11}, now=1).replica == "r1"


def test_a_prefix_nobody_holds_goes_to_its_home_replica():
    r = registry()
    r.report("r1", TENANT_A, now=0)
    unknown = list(range(5000, 5100))
    homes = {r.route(unknown, {"r1": 1, "r2": 4}, now=1).replica for _ in range(5)}
    assert len(homes) == 1 and r.route(unknown, {"r1": 1, "r2": 4}, now=1).reason == "placed"
    assert r.route(TENANT_A, {}, now=1).replica is None


def test_prefixes_expire_after_the_ttl():
    r = registry(ttl_s=3600)
    r.report("r1", TENANT_A, now=0)
    assert r.route(TENANT_A, {"r1": 0, "r2": 0}, now=3599).matched_blocks == 10
    assert r.route(TENANT_A, {"r1": 0, "r2": 0}, now=3600).matched_blocks == 0


def test_hot_prefixes_are_offered_to_a_fresh_replica():
    r = registry(hot_threshold=0.3, hot_min_hits=3)
    for t in range(10):
        r.report("r1", TENANT_A, now=t)  # every request: hot
        if t == 5:
            r.report("r1", TENANT_B, now=t)  # once: cold
    assert r.warmup("r2") == [tuple(TENANT_A)]
    assert r.warmup("r1") == []  # it holds it already


def test_a_lost_replica_is_forgotten():
    r = registry()
    r.report("r1", TENANT_A, now=0)
    r.forget("r1")
    assert r.route(TENANT_A, {"r1": 0, "r2": 0}, now=1).matched_blocks == 0
    assert r.snapshot()["replicas"] == {}


def test_replica_budget_bounds_what_it_is_assumed_to_hold():
    r = registry(replica_blocks=64)
    r.join("r1", capacity_tokens=12 * 16)
    r.report("r1", TENANT_A, now=0)
    r.report("r1", TENANT_B, now=1)  # 20 blocks into 12: the oldest go
    assert r.snapshot()["replicas"]["r1"]["blocks"] == 12
    assert r.route(TENANT_B, {"r1": 0}, now=2).matched_blocks == 10
