"""Pre-scaling ahead of a surge (policies.prescale) and the Serve policy that applies it
over the reactive count (deployments.control.autoscaling), on a fake clock."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from deployments.control.autoscaling import QueueLatencyPolicy
from policies.prescale import LoadSample, PrescaleConfig, ScheduledSurge, prescale
from tests.unit.test_model_path import context

PROMO = ScheduledSurge(start_unix_s=10_000, end_unix_s=17_200, load_multiple=10)
CONFIG = PrescaleConfig(schedule=(PROMO,), lead_s=300, reserve_replicas=1, give_back_after_s=600)


def flat(now: float, load: float, seconds: float = 60) -> list[LoadSample]:
    return [LoadSample(now - seconds + t, load) for t in range(0, int(seconds) + 1, 5)]


def test_a_scheduled_surge_gets_its_replicas_and_a_reserve_from_its_lead_time_to_its_end():
    # Baseline 64 requests in flight at 64 per replica: 10x needs 10 replicas, plus 1 warm.
    before = prescale(CONFIG, 9_600, flat(9_600, 64), 64, 64, 16)
    assert before.floor == 0
    lead = prescale(CONFIG, 9_700, flat(9_700, 64), 64, 64, 16)
    assert lead.floor == 11 and "scheduled surge at 10x" in lead.reason
    during = prescale(CONFIG, 12_000, flat(12_000, 600), 64, 64, 16)
    assert during.floor == 11
    assert prescale(CONFIG, 17_200, flat(17_200, 64), 64, 64, 16).floor == 0
    assert prescale(CONFIG, 9_700, flat(9_700, 64), 64, 64, 8).floor == 8  # never above max


def test_a_scheduled_surge_that_does_not_come_gives_its_replicas_back():
    # 600 s after the start the load is still under sqrt(10) x 64 = 202 (half-way to the
    # expected 640 on a log scale): released.
    early = prescale(CONFIG, 10_500, flat(10_500, 100), 64, 64, 16)
    assert early.floor == 11  # still waiting for it
    late = prescale(CONFIG, 10_700, flat(10_700, 100), 64, 64, 16)
    assert late.floor == 0 and "did not come" in late.reason
    # Calls carrying several tickets: 10x the tickets came as 4.6x the calls in flight. Kept.
    assert prescale(CONFIG, 10_700, flat(10_700, 4.6 * 64), 64, 64, 16).floor == 11


def test_a_surge_planned_in_replicas_gets_them_and_its_schedule_outranks_growth():
    # Calls carrying several tickets each: 64 calls in flight before it say little of the
    # surge's need; the operator's 6 replicas (plus the reserve) are the floor.
    planned = PROMO.model_copy(update={"replicas": 6})
    config = CONFIG.model_copy(update={"schedule": (planned,), "horizon_s": 300})
    growing = [LoadSample(9_640 + t, 64 * 3 ** (t / 60)) for t in range(0, 61, 5)]
    during = prescale(config, 9_700, growing, 64, 64, 16)
    assert during.floor == 7 and during.source == "schedule" and "6 replicas planned" in during.reason
    # Without a schedule the same growth projects far more.
    assert prescale(CONFIG.model_copy(update={"schedule": ()}), 9_700, growing, 64, 64, 16).floor == 16
    # Given back, the growth floor applies again.
    late = prescale(config, 10_700, flat(10_700, 100), 64, 64, 16)
    assert late.floor == 0 and "did not come" in late.reason


def test_a_growing_load_is_projected_ahead_and_a_steady_one_is_not():
    config = PrescaleConfig(growth_window_s=60, growth_trigger=1.5, horizon_s=60, reserve_replicas=1)
    growing = [LoadSample(1_000 + t, 100 * 2 ** (t / 60)) for t in range(0, 61, 5)]  # doubles per minute
    ahead = prescale(config, 1_060, growing, 100, 50, 32)
    # 200 now, doubling again in the next 60 s: 400 at 50 per replica = 8, plus 1.
    assert ahead.floor == 9 and "growth 2.00x" in ahead.reason
    assert prescale(config, 1_060, flat(1_060, 200), 200, 50, 32).floor == 0
    slow = [LoadSample(1_000 + t, 100 * 1.2 ** (t / 60)) for t in range(0, 61, 5)]
    assert prescale(config, 1_060, slow, 100, 50, 32).floor == 0
    assert prescale(config, 1_060, growing[-2:], 100, 50, 32).floor == 0  # 5 s of samples: no rate
    # A tiny load tripling (1 -> 3 in flight) is no surge while one replica's target (4) holds it.
    tiny = [LoadSample(1_000 + t, 1 + 2 * t / 60) for t in range(0, 61, 5)]
    assert prescale(config, 1_060, tiny, 1, 4, 32).floor == 0
    assert prescale(config, 1_060, tiny, 1, 2, 32).floor > 0
    off = config.model_copy(update={"growth_enabled": False})
    assert prescale(off, 1_060, growing, 100, 50, 32).floor == 0


def test_a_surge_must_end_after_it_starts():
    with pytest.raises(ValidationError, match="end_unix_s=5.0 must be after start_unix_s=10.0"):
        ScheduledSurge(start_unix_s=10, end_unix_s=5, load_multiple=3)


def test_the_serve_policy_raises_the_reactive_count_to_the_floor_and_keeps_the_baseline():
    policy = QueueLatencyPolicy(
        target_ongoing_per_replica=64,
        prescale={"schedule": [PROMO.model_dump()], "lead_s": 300, "reserve_replicas": 1},
    )

    def at(now: float, replicas: int, ongoing: float):
        ctx = context(replicas, ongoing, None)
        ctx.current_time = now
        ctx.capacity_adjusted_max_replicas = 16
        return policy(ctx)

    for t in range(9_500, 9_700, 10):
        assert at(t, 1, 64)[0] == 1  # steady at baseline 64: one replica
    replicas, state = at(9_710, 1, 64)  # within the lead time
    assert replicas == 11 and state["last_reason"].startswith("ahead of a surge: scheduled surge at 10x")
    assert state["cause"] == "schedule"
    # The surge's own load does not become its baseline: still 10 x 64 expected.
    assert at(10_100, 11, 640)[0] == 11


def test_a_decision_is_logged_once_while_it_waits_out_serves_delay(caplog):
    policy = QueueLatencyPolicy(target_ongoing_per_replica=10)
    caplog.set_level(logging.INFO, logger="ray.serve")
    for tick in range(20):  # two seconds of Serve's 0.1 s ticks, the count not yet applied
        ctx = context(1, 35 + tick / 10, None)  # the reason's figures move, the decision does not
        assert policy(ctx)[0] == 4
    ctx = context(4, 40, None)
    assert policy(ctx)[0] == 4  # applied: nothing to log
    for _ in range(5):
        assert policy(context(4, 80, None))[0] == 8
    lines = [r.getMessage() for r in caplog.records if "replicas" in r.getMessage()]
    assert len(lines) == 2 and "1 -> 4" in lines[0] and "4 -> 8" in lines[1]


def test_growth_raises_a_floor_whose_cause_is_growth():
    config = PrescaleConfig(growth_window_s=60, growth_trigger=1.5, horizon_s=60, reserve_replicas=0)
    rising = [LoadSample(1_000 + t, 64 + 4 * t) for t in range(0, 61, 5)]  # 64 -> 304 in flight
    floor = prescale(config, 1_060, rising, 64, 64, 16)
    assert floor.source == "growth" and floor.floor > 5, floor


def test_decisions_are_counted_by_cause_once_each():
    counted: list[dict[str, str]] = []
    policy = QueueLatencyPolicy(target_ongoing_per_replica=10, record_decision=counted.append)
    for tick in range(10):  # the same decision on every tick, its figures moving
        policy(context(1, 35 + tick / 10, None))
    policy(context(4, 40, None))  # applied: a new (current, wanted) pair, held
    policy(context(4, 4, None))  # both signals low
    assert [c["cause"] for c in counted] == ["queue", "hold", "both_low"]
    assert {c["deployment"] for c in counted} == {"ModelReplica"} and {c["application"] for c in counted} == {"tickets"}
