from policies.review import DEFAULT_REVIEW_CONFIDENCE, needs_review


def test_the_answering_models_threshold_decides_unless_the_config_sets_one():
    # The other generation (or a canary) calibrated 0.8; this graph's own model 0.4.
    assert needs_review("refund", 0.7, "model", None, 0.8)
    assert not needs_review("refund", 0.7, "model", None, 0.4)
    assert not needs_review("refund", 0.7, "model", 0.6, 0.8)
    assert needs_review("refund", DEFAULT_REVIEW_CONFIDENCE - 0.01, "degraded", None, None)
    assert not needs_review("refund", DEFAULT_REVIEW_CONFIDENCE, "edge_model", None, None)


def test_out_of_scope_is_always_flagged_and_templates_never():
    assert needs_review("out_of_scope", 0.99, "model", None, 0.5)
    assert not needs_review("password_reset", 0.1, "template", None, 0.5)
