import pytest

from policies.audit import audit_estimate, should_audit, wilson_interval


def test_only_unflagged_uncached_answers_are_drawn_at_the_share():
    assert should_audit("model", False, 0.02, 0.0199)
    assert not should_audit("model", False, 0.02, 0.02)
    assert should_audit("template", False, 0.02, 0.01)  # the operator's rules are audited too
    assert not should_audit("model", True, 1.0, 0.0)
    assert not should_audit("cache", False, 1.0, 0.0)
    assert not should_audit("edge_model", False, 0.0, 0.0)


@pytest.mark.parametrize(
    "wrong, checked, low, high",
    [
        (0, 10, 0.0, 0.2775),  # Wilson's textbook values
        (10, 10, 0.7225, 1.0),
        (5, 100, 0.0215, 0.1118),
        (1, 1, 0.2065, 1.0),
    ],
)
def test_wilson_interval(wrong, checked, low, high):
    lo, hi = wilson_interval(wrong, checked)
    assert (round(lo, 4), round(hi, 4)) == (low, high)
    assert lo <= wrong / checked <= hi


def test_wilson_interval_refuses_impossible_counts():
    with pytest.raises(ValueError, match="checked=0"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="wrong=3: must be between 0 and checked=2"):
        wilson_interval(3, 2)


def test_estimate_before_and_after_the_first_check():
    assert audit_estimate(0, 0).wrong_share is None and audit_estimate(0, 0).interval95 is None
    estimate = audit_estimate(200, 6)
    assert estimate.interval95 is not None
    assert estimate.wrong_share == 0.03 and estimate.interval95[0] < 0.03 < estimate.interval95[1]
