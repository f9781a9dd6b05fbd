"""Adaptive batching, circuit breaker, retry matrix and budget, memory reclaim, autoscaling:
every rule and state transition on a fake clock (`now` passed in)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.admission import AdaptiveConcurrency, AdmissionConfig
from policies.autoscale import AutoscaleConfig, ScaleSignals, desired_replicas
from policies.batching import AdaptiveBatchSize, BatchSignals, BatchSizeConfig, batch_cap
from policies.breaker import BreakerConfig, BreakerState, CircuitBreaker, Resources
from policies.cache import LruTtlCache
from policies.reclaim import ReclaimConfig, ReclaimMonitor
from policies.retry import RetryBudget, RetryConfig, next_step
from policies.window import EventRate, LatencyWindow

CALM = BatchSignals(memory_pressure=0.5, p95_ms=100, qps=10)


# --- adaptive batch size -------------------------------------------------------------


def batcher(cap=16, **kw) -> AdaptiveBatchSize:
    return AdaptiveBatchSize(BatchSizeConfig(**kw), cap, now=0.0)


def test_batch_starts_at_8_and_holds_when_calm():
    b = batcher()
    assert b.size == 8
    assert b.decide(CALM, now=100).reason == "hold" and b.size == 8


def test_batch_memory_pressure_halves_within_step_limit():
    b = batcher(start_size=8)
    d = b.decide(BatchSignals(0.95, 100, 10), now=31)
    assert (d.size, d.reason) == (4, "memory_pressure")
    b = batcher(cap=64, start_size=32)
    assert b.decide(BatchSignals(0.95, 100, 10), now=31).size == 28  # halving capped at -4


def test_batch_latency_shrinks_by_two_and_throughput_grows_by_ten_percent():
    b = batcher()
    assert b.decide(BatchSignals(0.5, 1500, 10), now=31).size == 6
    b = batcher(cap=32, start_size=8)
    assert b.decide(BatchSignals(0.5, 100, 1500), now=31).size == 9  # at least +1
    b = batcher(cap=64, start_size=30)
    assert b.decide(BatchSignals(0.5, 100, 1500), now=31).size == 33
    assert batcher().decide(BatchSignals(0.8, 100, 1500), now=31).reason == "hold"  # pressure too high to grow


def test_batch_rules_in_priority_order():
    b = batcher()
    # Memory pressure wins over latency and throughput.
    assert b.decide(BatchSignals(0.95, 5000, 5000), now=31).reason == "memory_pressure"


def test_batch_cooldown_between_changes():
    b = batcher(cap=32)
    assert b.decide(BatchSignals(0.5, 100, 1500), now=31).size == 9
    assert b.decide(BatchSignals(0.5, 100, 1500), now=60).reason == "cooldown"
    assert b.decide(BatchSignals(0.5, 100, 1500), now=61).size == 10


def test_batch_never_leaves_bounds():
    b = batcher(cap=16, start_size=16)
    assert b.decide(BatchSignals(0.5, 100, 5000), now=31).reason == "hold"  # at the cap
    b = batcher(min_size=2, start_size=2)
    assert b.decide(BatchSignals(0.99, 100, 10), now=31).size == 2


def test_batch_disabled_holds_start_size():
    b = batcher(enabled=False)
    assert b.decide(BatchSignals(0.99, 5000, 10), now=100).size == 8


def test_batch_cap_by_device():
    c = BatchSizeConfig()
    assert batch_cap(c, accelerator_gib=80, kv_capacity_seqs=999) == 32
    assert batch_cap(c, accelerator_gib=24, kv_capacity_seqs=999) == 16
    assert batch_cap(c, accelerator_gib=None, kv_capacity_seqs=200) == 200  # CPU: the KV budget
    assert batch_cap(BatchSizeConfig(cap_size=12), accelerator_gib=80, kv_capacity_seqs=999) == 12


def test_batch_config_errors_name_values():
    with pytest.raises(ValueError, match="8, 4"):
        BatchSizeConfig(start_size=8, cap_size=4)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(8, 64),
    st.lists(
        st.tuples(st.floats(0, 1), st.one_of(st.none(), st.floats(0, 5000)), st.floats(0, 5000), st.floats(0, 100)),
        max_size=60,
    ),
)
def test_batch_size_always_within_bounds(min_size, cap, steps):
    b = AdaptiveBatchSize(BatchSizeConfig(min_size=min_size, cooldown_s=0), cap, now=0.0)
    now, previous = 0.0, b.size
    for pressure, p95, qps, dt in steps:
        now += dt
        size = b.decide(BatchSignals(pressure, p95, qps), now).size
        assert min_size <= size <= cap
        assert abs(size - previous) <= 4
        previous = size


# --- circuit breaker -----------------------------------------------------------------


def breaker(**kw) -> CircuitBreaker:
    base = dict(window_calls=10, min_calls=4, open_wait_s=30, half_open_probes=2)
    return CircuitBreaker(BreakerConfig(**{**base, **kw}), now=0.0)


def test_breaker_closed_until_min_calls_then_opens_on_failure_rate():
    b = breaker()
    for _ in range(3):
        b.record(True, 10, now=1)
    assert b.state is BreakerState.CLOSED  # 3 < min_calls
    b.record(True, 10, now=1)
    assert b.state is BreakerState.OPEN
    assert b.acquire(now=2) == "fallback"
    assert "failure rate 100%" in b.transitions[-1].reason


def test_breaker_stays_closed_below_threshold():
    b = breaker()
    for i in range(10):
        b.record(i % 4 == 3, 10, now=1)  # every 4th fails: 25 % < 50 % from the 4th call on
    assert b.state is BreakerState.CLOSED and b.acquire(now=1) == "pass"


def test_breaker_opens_on_slow_calls():
    b = breaker(slow_call_ms=100, slow_call_rate_percent=75)
    for _ in range(4):
        b.record(False, 150, now=1)
    assert b.state is BreakerState.OPEN and "slow-call" in b.transitions[-1].reason


def test_breaker_open_waits_then_half_open_probes_close_it():
    b = breaker()
    for _ in range(4):
        b.record(True, 10, now=0)
    assert b.acquire(now=29.9) == "fallback"
    assert b.acquire(now=30) == "probe" and b.state is BreakerState.HALF_OPEN
    assert b.acquire(now=30) == "probe"
    assert b.acquire(now=30) == "fallback"  # only half_open_probes permits
    b.record(False, 10, now=31)
    assert b.state is BreakerState.HALF_OPEN
    b.record(False, 10, now=31)
    assert b.state is BreakerState.CLOSED and b.acquire(now=31) == "pass"
    assert [t.target for t in b.transitions] == [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED]


def test_breaker_failed_probes_reopen():
    b = breaker()
    for _ in range(4):
        b.record(True, 10, now=0)
    b.acquire(now=30), b.acquire(now=30)
    b.record(True, 10, now=31)
    b.record(False, 10, now=31)  # 50 % of probes failed
    assert b.state is BreakerState.OPEN
    assert b.acquire(now=60) == "fallback" and b.acquire(now=61) == "probe"


def test_breaker_lost_probes_are_granted_again():
    b = breaker()
    for _ in range(4):
        b.record(True, 10, now=0)
    b.acquire(now=30), b.acquire(now=30)
    assert b.acquire(now=40) == "fallback"  # permits out, outcomes never came
    assert b.acquire(now=60) == "probe"


def test_breaker_outcomes_while_open_are_ignored():
    b = breaker()
    for _ in range(4):
        b.record(True, 10, now=0)
    for _ in range(10):
        b.record(False, 10, now=5)
    assert b.state is BreakerState.OPEN


def test_breaker_resource_triggers():
    b = breaker()
    b.observe_resources("r1", Resources(cpu_percent=10, memory_percent=95, utilization_percent=None), now=0)
    assert b.acquire(now=1) == "fallback"
    b.observe_resources("r1", Resources(10, 50, 99), now=2)
    assert b.acquire(now=2) == "fallback"
    b.observe_resources("r1", Resources(90, 50, 50), now=3)
    assert b.acquire(now=3) == "pass"  # CPU hot, not yet for 60 s
    b.observe_resources("r1", Resources(90, 50, 50), now=62)
    assert b.acquire(now=63) == "reject_new"
    b.observe_resources("r1", Resources(50, 50, 50), now=64)
    assert b.acquire(now=64) == "pass"
    b.observe_resources("r2", Resources(10, 99, None), now=64)
    assert b.acquire(now=75) == "pass"  # r2's reading is stale after 10 s


def test_breaker_resource_triggers_can_be_off_and_breaker_disabled():
    b = breaker(cpu_reject_percent=None, memory_fallback_percent=None)
    b.observe_resources("r1", Resources(99, 99, None), now=0)
    assert b.acquire(now=100) == "pass"
    off = breaker(enabled=False)
    for _ in range(10):
        off.record(True, 10, now=0)
    assert off.state is BreakerState.CLOSED and off.acquire(now=1) == "pass"


# --- retry matrix and budget ---------------------------------------------------------


@pytest.mark.parametrize(
    "cause, retries, wait_s, then",
    [("throttled", 2, 0.2, "cache"), ("unavailable", 1, 0.5, "degraded"), ("out_of_memory", 0, 0.0, "degraded")],
)
def test_retry_matrix_rows(cause, retries, wait_s, then):
    config = RetryConfig(budget_min_retries=100)
    budget = RetryBudget(config)
    steps = [next_step(config, cause, tries, budget, now=0) for tries in range(1, 5)]
    assert [s.retry for s in steps] == [True] * retries + [False] * (4 - retries)
    assert all(s.wait_s == wait_s for s in steps[:retries])
    assert steps[retries].then == then


def test_retry_disabled_gives_up_at_once():
    config = RetryConfig(enabled=False)
    step = next_step(config, "throttled", 1, RetryBudget(config), now=0)
    assert (step.retry, step.then) == (False, "cache")


def test_retry_budget_caps_retries_at_share_of_requests():
    config = RetryConfig(budget_percent=10, budget_window_s=10, budget_min_retries=0)
    budget = RetryBudget(config)
    for _ in range(50):
        budget.record_request(now=0)
    assert [budget.try_spend(now=1) for _ in range(6)] == [True] * 5 + [False]
    assert not next_step(config, "unavailable", 1, budget, now=1).retry  # the matrix allows, the budget not
    assert budget.try_spend(now=10.5) is False  # requests expired with the window
    for _ in range(10):
        budget.record_request(now=11)
    assert budget.try_spend(now=11) is True


def test_retry_budget_minimum_for_quiet_service():
    budget = RetryBudget(RetryConfig(budget_min_retries=3))
    budget.record_request(now=0)
    assert [budget.try_spend(now=0) for _ in range(4)] == [True, True, True, False]


# --- memory reclaim ------------------------------------------------------------------


def test_reclaim_ladder_on_failures_in_a_row():
    m = ReclaimMonitor(ReclaimConfig(min_interval_s=0))
    m.record(True, False, 10), m.record(True, False, 10)
    assert m.decide(now=0) is None
    m.record(True, False, 10)
    assert (m.decide(now=0).action, m.decide(now=0)) == ("shrink_batch", None)  # evidence reset
    for action in ("free_caches", "restart_engine", "restart_engine"):
        for _ in range(3):
            m.record(True, False, 10)
        assert m.decide(now=1).action == action


def test_reclaim_success_breaks_the_row_and_calm_restarts_ladder():
    m = ReclaimMonitor(ReclaimConfig(min_interval_s=0, calm_s=60))
    for failed in (True, True, False, True, True):
        m.record(failed, False, 10)
    assert m.decide(now=0) is None
    m.record(True, False, 10)
    assert m.decide(now=0).action == "shrink_batch"
    m.record(True, True, 10)
    assert m.decide(now=30).action == "free_caches"  # within calm_s: next rung
    m.record(True, True, 10)
    assert m.decide(now=100).action == "shrink_batch"  # 70 s calm: from the first rung


def test_reclaim_out_of_memory_and_timeouts():
    m = ReclaimMonitor(ReclaimConfig(min_interval_s=5, min_calls=10, timeout_ms=1000))
    m.record(True, True, 10)
    assert m.decide(now=0).trigger == "out_of_memory"
    m.record(True, True, 10)
    assert m.decide(now=1) is None  # min_interval_s
    assert m.decide(now=6).trigger == "out_of_memory"
    for i in range(10):
        m.record(False, False, 2000 if i < 2 else 10)  # 20 % timed out
    assert m.decide(now=12).trigger == "timeout_rate"


def test_reclaim_disabled_never_acts():
    m = ReclaimMonitor(ReclaimConfig(enabled=False))
    m.record(True, True, 10)
    assert m.decide(now=0) is None


# --- autoscaling ---------------------------------------------------------------------


def test_autoscale_up_on_queue_or_latency_down_one_at_a_time():
    c = AutoscaleConfig(target_ongoing_per_replica=10, p95_target_ms=1000, scale_down_below=0.5)
    assert desired_replicas(c, ScaleSignals(2, 45, 100))[0] == 5
    assert desired_replicas(c, ScaleSignals(2, 10, 1500))[0] == 3
    assert desired_replicas(c, ScaleSignals(2, 15, 600))[0] == 2  # hysteresis band: hold
    assert desired_replicas(c, ScaleSignals(4, 4, 100))[0] == 3
    assert desired_replicas(c, ScaleSignals(1, 0, None))[0] == 1
    assert desired_replicas(c, ScaleSignals(0, 3, None))[0] == 1
    causes = [
        desired_replicas(c, ScaleSignals(*s)).cause for s in [(2, 45, 100), (2, 10, 1500), (2, 15, 600), (4, 4, 100)]
    ]
    assert causes == ["queue", "latency", "hold", "both_low"]


def test_refused_calls_count_as_the_queue_they_would_have_made():
    c = AutoscaleConfig(target_ongoing_per_replica=10, p95_target_ms=1000, scale_down_below=0.5)
    # 2 replicas at 16 in flight (under 20) and p95 500 ms: a hold, until 30 calls/s are
    # refused: 30 x 0.5 s = 15 more in the queue, 31 for 10 per replica: 4 replicas.
    assert desired_replicas(c, ScaleSignals(2, 16, 500)).cause == "hold"
    d = desired_replicas(c, ScaleSignals(2, 16, 500, throttled_per_s=30))
    assert (d.replicas, d.cause) == (4, "throttled")
    # Before any call finished the p95 target stands in: 2/s x 1 s.
    assert desired_replicas(c, ScaleSignals(1, 9, None, throttled_per_s=2)).replicas == 2
    # A queue over its target keeps its own cause; refusals keep a low queue from scaling down.
    assert desired_replicas(c, ScaleSignals(2, 25, 500, throttled_per_s=30)).cause == "queue"
    assert desired_replicas(c, ScaleSignals(4, 12, 400)).cause == "both_low"
    assert desired_replicas(c, ScaleSignals(4, 12, 400, throttled_per_s=20)).cause == "hold"


# --- adaptive admission limit --------------------------------------------------------


def test_admission_aimd():
    a = AdaptiveConcurrency(AdmissionConfig(target_p99_ms=200, initial_limit=20, min_limit=4, max_limit=24), now=0)
    assert a.update(500, peak_inflight=20, now=0.5) == 20  # not due yet
    assert a.update(500, peak_inflight=20, now=1) == 16  # over target: x0.8
    assert a.update(100, peak_inflight=10, now=2) == 16  # held, limit not reached: no growth
    assert a.update(100, peak_inflight=16, now=3) == 18  # held and saturated: +2
    assert a.update(None, peak_inflight=18, now=4) == 20
    for t in range(5, 10):
        a.update(100, peak_inflight=30, now=t)
    assert a.limit == 24  # max_limit
    for t in range(10, 30):
        a.update(900, peak_inflight=30, now=t)
    assert a.limit == 4  # min_limit


def test_admission_off_is_the_fixed_bound():
    a = AdaptiveConcurrency(AdmissionConfig(enabled=False, max_limit=100), now=0)
    assert a.update(10_000, peak_inflight=100, now=50) == 100
    with pytest.raises(ValueError, match="4, 2, 100"):
        AdmissionConfig(min_limit=4, initial_limit=2, max_limit=100)


# --- helpers -------------------------------------------------------------------------


def test_latency_window_p95_and_rate():
    w = LatencyWindow(span_s=10)
    assert w.p95_ms(now=0) is None
    for i in range(100):
        w.add(float(i + 1), now=i * 0.1)
    assert w.p95_ms(now=9.9) == 95.0
    assert w.rate_per_s(now=9.9) == 10.0
    assert w.rate_per_s(now=15) == pytest.approx(4.9)


def test_event_rate_counts_the_last_span_only():
    r = EventRate(span_s=2)
    assert r.per_s(now=0) == 0
    for t in (0.0, 0.5, 1.0, 1.5):
        r.add(now=t)
    assert r.per_s(now=1.9) == 2.0
    assert r.per_s(now=2.6) == 1.0  # 0, 0.5 left the window
    with pytest.raises(ValueError, match="span_s must be > 0, got 0"):
        EventRate(span_s=0)


def test_cache_keeps_expired_entries_for_stale_fallback():
    cache = LruTtlCache(max_entries=2, ttl_s=10)
    cache.put("a", 1, now=0)
    assert cache.get("a", now=11) is None and cache.get_stale("a") == 1
