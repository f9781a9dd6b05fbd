"""Prefix block store: chained hashes, exact eviction order and TTL on a fake clock,
contract tests over every eviction policy, hot tier, and a budget that is never exceeded."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kv_partition.store import (
    BlockStore,
    LruPolicy,
    LruTtlPolicy,
    RangeStore,
    block_hashes,
)

POLICIES = {"lru": LruPolicy, "lru_ttl": lambda: LruTtlPolicy(ttl_s=100)}


def keys(n: int) -> list[bytes]:
    return [bytes([i]) * 32 for i in range(n)]


def store(blocks: int, policy=None, **kw) -> BlockStore:
    return BlockStore({"all": RangeStore(budget_bytes=blocks * 10, block_bytes=10, policy=policy or LruPolicy())}, **kw)


def held(s: BlockStore) -> set[bytes]:
    return set(s._ranges["all"].blocks)


def test_block_hashes_chain_like_vllm():
    a = block_hashes(list(range(40)), 16)
    b = block_hashes(list(range(32)) + [99] * 8, 16)
    assert len(a) == 2 and a == b  # the partial third block has no hash
    assert block_hashes([1] * 16 + list(range(16)), 16)[1] != block_hashes([2] * 16 + list(range(16)), 16)[1]
    assert block_hashes(list(range(16)), 16, extra_key="v2") != block_hashes(list(range(16)), 16)


@pytest.mark.parametrize("name", POLICIES)
def test_policy_contract(name):
    policy = POLICIES[name]()
    k = keys(5)
    for i, key in enumerate(k):
        policy.on_put(key, float(i))
    policy.on_hit(k[0], 10.0)
    policy.on_remove(k[2])
    order = list(policy.candidates(11.0))
    assert sorted(order) == sorted(set(k) - {k[2]})  # every live key, once
    policy.on_hit(b"missing" * 4, 12.0)  # unknown keys are ignored
    assert b"missing" * 4 not in list(policy.candidates(12.0))


def test_exact_eviction_order_lru():
    k = keys(4)
    s = store(3, LruPolicy())
    s.put([k[0]], now=0)
    s.put([k[1]], now=1)
    s.put([k[2]], now=2)
    s.lookup([k[0]], now=3)  # k0 is now the most recent: k1 goes
    s.put([k[3]], now=4)
    assert held(s) == {k[0], k[2], k[3]}


def test_ttl_expires_unused_blocks_and_they_go_first():
    k = keys(3)
    s = store(3, LruTtlPolicy(ttl_s=100))
    s.put([k[0]], now=0)
    s.put([k[1]], now=50)
    assert s.lookup([k[0]], now=99) == 1  # used at 99: lives until 199
    assert s.lookup([k[1]], now=149) == 1  # one second before its TTL ran out
    assert s.lookup([k[0]], now=199) == 0 and held(s) == {k[1]}
    assert s.lookup([k[1]], now=249) == 0 and held(s) == set()


def test_leaves_go_before_their_prefix():
    chain = block_hashes(list(range(48)), 16)  # 3 blocks: a -> b -> c
    s = store(3)
    s.put(chain, now=0)
    s.put(keys(1), now=1)  # one more block: the deepest one of the chain goes
    assert held(s) == {chain[0], chain[1], keys(1)[0]}
    assert s.lookup(chain, now=2) == 2


def test_hot_blocks_are_promoted_and_outlive_cold_ones():
    k = keys(6)
    s = store(3, hot_threshold=0.3, hot_min_hits=3)
    s.put([k[0]], now=0)
    for t in range(1, 5):
        s.lookup([k[0]], now=t)  # 4 of 4 lookups: hot
    s.put([k[1]], now=5)
    s.put([k[2]], now=6)
    assert s.hot_keys() == [k[0]]
    s.put([k[3]], now=7)
    s.put([k[4]], now=8)  # LRU alone would take k0 (used at 4) first
    assert k[0] in held(s) and s.snapshot()["all"]["hot"] == 1


def test_rare_blocks_stay_cold():
    k = keys(3)
    s = store(3, hot_threshold=0.3, hot_min_hits=3)
    s.put(k[:2], now=0)
    for t in range(10):
        s.lookup([k[1]], now=t)
        if t % 5 == 0:
            s.lookup([k[0]], now=t)  # 2 hits of 20 lookups: share 0.1
    assert s.hot_keys() == [k[1]]


def test_a_block_larger_than_the_budget_is_refused():
    s = BlockStore({"all": RangeStore(budget_bytes=5, block_bytes=10, policy=LruPolicy())})
    assert s.put(keys(1), now=0) == 0 and s.snapshot()["all"]["refused"] == 1


def test_ranges_hold_their_own_budgets():
    s = BlockStore(
        {
            "edge_layers": RangeStore(budget_bytes=100, block_bytes=10, policy=LruPolicy()),
            "center_layers": RangeStore(budget_bytes=100, block_bytes=40, policy=LruPolicy()),
        }
    )
    s.put(keys(5), now=0)
    snap = s.snapshot()
    assert snap["edge_layers"]["blocks"] == 5 and snap["center_layers"]["blocks"] == 2
    assert s.lookup(keys(5), now=1) == 0  # the first blocks left the center range: no full prefix


operations = st.lists(
    st.tuples(
        st.sampled_from(["put", "lookup"]), st.lists(st.integers(0, 30), min_size=1, max_size=6), st.floats(0, 5)
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(operations, st.sampled_from(list(POLICIES)), st.integers(1, 8), st.integers(1, 4))
def test_budget_is_never_exceeded(ops, name, budget_blocks, block_bytes):
    s = BlockStore(
        {"r": RangeStore(budget_bytes=budget_blocks * 10, block_bytes=block_bytes * 10, policy=POLICIES[name]())}
    )
    now = 0.0
    for op, ids, dt in ops:
        now += dt
        hashes = [bytes([i]) * 32 for i in ids]
        s.put(hashes, now) if op == "put" else s.lookup(hashes, now)
        r = s._ranges["r"]
        assert r.used_bytes <= r.budget_bytes
        assert r.used_bytes == sum(b.size_bytes for b in r.blocks.values())
        assert sorted(r.policy.candidates(now)) == sorted(r.blocks)
