import numpy as np

from models import calibration


def _overconfident(n=4000, classes=5, seed=0):
    """Logits whose softmax is sharper than the truth: labels drawn from softmax(z),
    logits given as 3 z."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, size=(n, classes))
    p = calibration.softmax(z)
    y = np.array([rng.choice(classes, p=row) for row in p])
    return 3 * z, y


def test_temperature_undoes_a_known_sharpening_and_lowers_ece():
    logits, y = _overconfident()
    t = calibration.fit_temperature(logits, y)
    assert 2.5 < t < 3.5
    before = calibration.expected_calibration_error(calibration.softmax(logits), y)
    after = calibration.expected_calibration_error(calibration.softmax(logits, t), y)
    assert after < before / 2
    # Scaling never changes the answer.
    assert (calibration.softmax(logits, t).argmax(-1) == logits.argmax(-1)).all()


def test_review_threshold_flags_at_most_the_allowed_share_of_right_answers():
    conf = np.linspace(0.01, 1.0, 100)
    t = calibration.review_threshold(conf, 0.05)
    assert (conf < t).mean() <= 0.05
    assert (conf < t).sum() == 5
    assert calibration.review_threshold(np.array([]), 0.05) == 0.0


def test_oos_methods_count_recall_on_oos_rows_and_flags_on_right_in_scope_rows():
    # Rows: right in-scope (sure, unsure, below the threshold), out-of-scope caught by the
    # class and by the threshold, out-of-scope caught by the threshold only.
    probs = np.array([[0.9, 0.05, 0.05], [0.5, 0.3, 0.2], [0.42, 0.3, 0.28], [0.1, 0.1, 0.8], [0.4, 0.35, 0.25]])
    y = np.array([0, 0, 0, 2, 2])
    by_name = {f.method: f for f in calibration.compare_oos_methods(probs, y, oos_index=2, threshold=0.45)}
    assert by_name["explicit class"].oos_recall == 0.5
    assert by_name["explicit class"].in_scope_flagged == 0.0
    assert by_name["threshold on calibrated probability"].oos_recall == 1.0
    assert by_name["threshold on calibrated probability"].in_scope_flagged == 1 / 3
    assert by_name["class or threshold"].oos_recall == 1.0


def test_edge_gate_is_the_lowest_at_which_the_edge_matches_the_model():
    conf = np.array([0.95, 0.9, 0.85, 0.6, 0.5, 0.4])
    edge_right = np.array([True, True, True, False, False, True])
    model_right = np.array([True, True, True, True, True, True])
    assert calibration.edge_gate(conf, edge_right, model_right) == 0.61
    assert calibration.edge_gate(conf, ~edge_right, model_right) == 1.0
