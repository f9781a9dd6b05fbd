"""Canary split and judge: determinism, proportions, colouring, every rollback reason,
and promotion in steps only after every check held, on a fake clock."""

import pytest

from policies.canary import CanaryConfig, CanaryStats, judge, side_for

KEYS = [f"ticket-{i}" for i in range(20_000)]


def test_the_same_ticket_always_lands_on_the_same_side():
    assert [side_for(k, 5) for k in KEYS[:500]] == [side_for(k, 5) for k in KEYS[:500]]


@pytest.mark.parametrize("percent", [0, 5, 30, 100])
def test_the_share_follows_the_weight(percent):
    share = sum(side_for(k, percent) == "canary" for k in KEYS) / len(KEYS) * 100
    assert abs(share - percent) < 1.0


def test_raising_the_weight_only_moves_tickets_to_the_canary():
    at5 = {k for k in KEYS if side_for(k, 5) == "canary"}
    at15 = {k for k in KEYS if side_for(k, 15) == "canary"}
    assert at5 < at15


def test_the_colouring_header_overrides_the_split():
    assert side_for("ticket-1", 0, "canary") == "canary"
    assert side_for("ticket-1", 100, "stable") == "stable"
    assert side_for("ticket-1", 0, "purple") == "stable"  # not a side: the hash decides


CONFIG = CanaryConfig(hold_s=300, min_compared=50, min_canary_answers=50)
GOOD = CanaryStats(
    compared=200,
    agreed=196,
    canary_answers=200,
    canary_errors=0,
    canary_p99_ms=110,
    stable_p99_ms=100,
    stable_answers=500,
    golden_canary_accuracy=0.85,
    golden_stable_accuracy=0.84,
)


def stats(**kw) -> CanaryStats:
    return CanaryStats(**{**vars(GOOD), **kw})


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(agreed=150), "agreement 0.750"),
        (dict(golden_canary_accuracy=0.70), "golden accuracy 0.700 vs stable 0.840"),
        (dict(canary_errors=5), "error rate 2.50 %"),
        (dict(canary_p99_ms=400), "P99 400 ms vs stable 100 ms"),
        (
            dict(reviewed_canary_accuracy=0.30, reviewed_stable_accuracy=0.60),
            "reviewed-set accuracy 0.300 vs stable 0.600",
        ),
    ],
)
def test_any_broken_threshold_rolls_back_at_once_and_says_why(bad, words):
    d = judge(CONFIG, stats(**bad), canary_percent=15, since=0, now=1)
    assert (d.action, d.canary_percent) == ("rollback", 0.0) and words in d.reason


def test_thresholds_wait_for_their_samples():
    few = stats(compared=10, agreed=2, canary_answers=10, canary_errors=5, canary_p99_ms=900)
    d = judge(CONFIG, few, canary_percent=5, since=0, now=1000)
    assert (d.action, d.canary_percent, d.reason) == ("hold", 5, "waiting for samples")
    no_golden = stats(golden_canary_accuracy=None)
    assert judge(CONFIG, no_golden, 5, since=0, now=1000).reason == "waiting for samples"


def test_promotes_in_steps_after_the_hold_time_then_completes():
    percent, since, now, path = CONFIG.start_percent, 0.0, 0.0, []
    while True:
        now += 60
        d = judge(CONFIG, GOOD, percent, since, now)
        if d.action == "promote":
            assert now - since >= CONFIG.hold_s
            percent, since = d.canary_percent, now
            path.append(percent)
        elif d.action == "complete":
            break
        else:
            assert d.action == "hold" and "holding" in d.reason
    assert path == [15, 25, 35, 45, 55, 65, 75, 85, 95, 100]


def test_nothing_to_do_without_a_rollout():
    assert judge(CONFIG, GOOD, canary_percent=0, since=0, now=10_000).action == "hold"


@pytest.mark.parametrize(
    "canary, stable, promoted",
    [
        (0.80, 0.60, True),  # better on what people corrected
        (0.61, 0.60, True),  # by the minimum gain
        (0.60, 0.60, False),  # no better: held, not rolled back
        (0.58, 0.60, False),  # a little worse, within the allowed drop: held
        (1.00, 1.00, True),  # nothing left to gain
    ],
)
def test_a_candidate_is_promoted_only_when_better_on_its_reviewed_set(canary, stable, promoted):
    d = judge(CONFIG, stats(reviewed_canary_accuracy=canary, reviewed_stable_accuracy=stable), 15, since=0, now=1000)
    assert d.action == ("promote" if promoted else "hold"), d
    if not promoted:
        assert "not better on the reviewed set" in d.reason and d.canary_percent == 15


def test_a_candidate_not_better_for_max_unproven_s_is_rolled_back():
    config = CONFIG.model_copy(update={"max_unproven_s": 600})
    no_better = stats(reviewed_canary_accuracy=0.60, reviewed_stable_accuracy=0.60)
    assert judge(config, no_better, 15, since=0, now=599).action == "hold"
    d = judge(config, no_better, 15, since=0, now=600)
    assert (d.action, d.canary_percent) == ("rollback", 0.0)
    assert d.reason == "not better on the reviewed set: 0.600 vs stable 0.600 (needs +0.010) for 600 s"
    # A better one is promoted whatever the time; without the setting, held for ever.
    better = stats(reviewed_canary_accuracy=0.70, reviewed_stable_accuracy=0.60)
    assert judge(config, better, 15, since=0, now=5000).action == "promote"
    assert judge(CONFIG, no_better, 15, since=0, now=10**6).action == "hold"


@pytest.mark.parametrize(
    "agreed, reviewed, action",
    [
        (150, (0.80, 0.60), "promote"),  # better on its reviewed set: may disagree up to 1 - 0.15 - 0.16
        (130, (0.80, 0.60), "rollback"),  # 0.65: more than both sides' golden errors explain
        (150, (0.60, 0.60), "rollback"),  # no better where people corrected: the 0.9 floor holds
        (150, None, "rollback"),  # no reviewed set: the 0.9 floor holds
    ],
)
def test_a_candidate_better_on_its_reviewed_set_may_disagree_as_golden_errors_allow(agreed, reviewed, action):
    canary, stable = reviewed or (None, None)
    s = stats(agreed=agreed, reviewed_canary_accuracy=canary, reviewed_stable_accuracy=stable)
    d = judge(CONFIG, s, 15, since=0, now=1000)
    assert d.action == action, d
    if action == "rollback":
        assert "agreement" in d.reason


def test_a_p99_of_fewer_than_min_p99_answers_neither_rolls_back_nor_promotes():
    """Over 60 answers a P99 is about the slowest one: no verdict on it, either way."""
    slow_once = stats(canary_answers=60, canary_p99_ms=400)
    d = judge(CONFIG, slow_once, 15, since=0, now=1000)
    assert (d.action, d.reason) == ("hold", "waiting for samples")
    assert judge(CONFIG, stats(canary_answers=60), 15, since=0, now=1000).reason == "waiting for samples"
    assert judge(CONFIG, stats(canary_answers=100, canary_p99_ms=400), 15, since=0, now=1000).action == "rollback"


def test_p99s_are_compared_only_where_stable_answered_as_much_of_the_same_traffic():
    """At 100 % stable answers only what callers sent before they saw the split, at no
    load, while the canary carries all of it: 193 ms against 93 ms rolled back a candidate
    that had held at 50 %."""
    full = stats(canary_answers=300, canary_p99_ms=193, stable_p99_ms=93, stable_answers=12)
    assert judge(CONFIG, full, 100, since=0, now=1000).action == "complete"
    at_half = stats(canary_answers=300, canary_p99_ms=193, stable_p99_ms=93, stable_answers=300)
    assert judge(CONFIG, at_half, 50, since=0, now=1000).action == "rollback"


def test_agreement_waits_for_the_golden_run_that_brings_the_reviewed_set():
    """Shadow comparisons reach min_compared before the golden and reviewed sets are
    answered; judged then, a candidate that corrects stable met the fixed 0.9 floor."""
    early = stats(agreed=166, golden_canary_accuracy=None, golden_stable_accuracy=None)
    assert judge(CONFIG, early, 15, since=0, now=1000).reason == "waiting for samples"
    later = stats(agreed=166, reviewed_canary_accuracy=0.8, reviewed_stable_accuracy=0.6)
    assert judge(CONFIG, later, 15, since=0, now=1000).action == "promote"
