"""Label drift: Jensen-Shannon distance of the recent answers' mix from the training mix."""

from __future__ import annotations

import math

import pytest

from policies.label_drift import LabelDrift, LabelDriftConfig, js_distance

TRAINING = {"refund": 50, "shipping": 30, "password": 20}


def test_same_mix_is_zero_and_disjoint_mixes_are_one():
    assert js_distance(TRAINING, {"refund": 5, "shipping": 3, "password": 2}) == pytest.approx(0, abs=1e-9)
    assert js_distance({"refund": 1}, {"shipping": 1}) == pytest.approx(1)


def test_distance_is_symmetric_and_matches_the_textbook_value():
    p, q = {"a": 0.5, "b": 0.5}, {"a": 1.0}
    # JSD = H(m) - (H(p) + H(q)) / 2 with m = (0.75, 0.25): 0.811278 - 0.5 = 0.311278 bits.
    assert js_distance(p, q) == pytest.approx(math.sqrt(0.311278), abs=1e-6)
    assert js_distance(q, p) == pytest.approx(js_distance(p, q))


def test_no_distance_before_min_answers():
    drift = LabelDrift(LabelDriftConfig(window_answers=10, min_answers=4), TRAINING)
    for label in ("refund", "shipping", "password"):
        drift.add(label)
    assert drift.distance() is None
    drift.add("refund")
    assert drift.distance() is not None


def test_a_label_flood_moves_the_distance_and_the_window_forgets_it():
    drift = LabelDrift(LabelDriftConfig(window_answers=10, min_answers=10), TRAINING)
    for label in ["refund"] * 5 + ["shipping"] * 3 + ["password"] * 2:
        drift.add(label)
    calm = drift.distance()
    assert calm is not None and calm < 0.05
    for _ in range(10):  # a broken form: every ticket answered the same
        drift.add("out_of_scope")
    assert drift.distance() == pytest.approx(1)
    for label in ["refund"] * 5 + ["shipping"] * 3 + ["password"] * 2:
        drift.add(label)
    assert drift.distance() == pytest.approx(calm)


def test_excluded_labels_count_on_neither_side():
    reference = {**TRAINING, "out_of_scope": 100}
    drift = LabelDrift(LabelDriftConfig(window_answers=20, min_answers=10), reference, frozenset({"out_of_scope"}))
    for label in ["refund"] * 5 + ["shipping"] * 3 + ["password"] * 2 + ["out_of_scope"] * 10:
        drift.add(label)
    assert drift.distance() == pytest.approx(0, abs=1e-9)


def test_an_empty_reference_is_refused():
    with pytest.raises(ValueError, match="reference"):
        LabelDrift(LabelDriftConfig(), {})
    with pytest.raises(ValueError, match="out_of_scope"):
        LabelDrift(LabelDriftConfig(), {"out_of_scope": 3}, frozenset({"out_of_scope"}))
    with pytest.raises(ValueError, match="positive total"):
        js_distance({}, TRAINING)
