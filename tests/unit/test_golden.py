"""The golden set is what it claims to be, and the evaluation scores answers right."""

import csv
import math

import pytest
import yaml

from deployments.config_base import PROJECT_ROOT
from models.build import BUNDLED_DATA, BUNDLED_INTENTS
from models.golden import CASES, GOLDEN, ROUTES, GoldenItem, load, report, score
from policies.templates import TemplateSet

ITEMS = load()


def test_it_covers_every_intent_language_and_hard_case():
    intents = {i["name"] for i in yaml.safe_load(BUNDLED_INTENTS.read_text())}
    assert len(ITEMS) >= 300
    assert {i.intent for i in ITEMS} == intents
    for intent in intents:
        assert {i.lang for i in ITEMS if i.intent == intent} == {"en", "zh", "ja"}, intent
    assert {i.case for i in ITEMS} == set(CASES) and {i.route for i in ITEMS} == set(ROUTES)
    assert max(len(i.text) for i in ITEMS) > 400  # very long tickets


def test_tickets_are_unique_and_not_in_the_training_data():
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        training = {row["text"].strip().lower() for row in csv.DictReader(f)}
    texts = [i.text.strip().lower() for i in ITEMS]
    assert len(set(texts)) == len(texts)
    assert not set(texts) & training


def test_expected_template_routes_agree_with_the_template_rules():
    templates = TemplateSet.from_yaml(PROJECT_ROOT / "config" / "templates.yaml")
    for item in ITEMS:
        match = templates.match(item.text, item.lang)
        if item.route == "template":
            assert match is not None and match.intent == item.intent, item
        else:
            assert match is None, item


def test_edge_route_is_expected_only_for_simple_intents():
    tiers = {i["name"]: i["tier"] for i in yaml.safe_load(BUNDLED_INTENTS.read_text())}
    assert all(tiers[i.intent] == "simple" for i in ITEMS if i.route == "edge")


def test_score_counts_accuracy_routes_and_missing_answers():
    items = [
        GoldenItem("a", "refund_request", "en", "model", "typical"),
        GoldenItem("b", "order_status", "zh", "template", "typo"),
        GoldenItem("c", "order_status", "ja", "edge", "typical"),
        GoldenItem("d", "complaint", "en", "model", "long"),
    ]
    answers = [
        {"label": "refund_request", "route": "cache"},  # a cached model answer
        {"label": "order_status", "route": "template"},
        {"label": "track_refund", "route": "model"},
        {"error": {"code": "overloaded", "message": "..."}},
    ]
    result = score(items, answers)
    assert result["answered"] == 3 and result["unanswered"] == ["d"]
    assert math.isclose(result["accuracy"], 2 / 3, rel_tol=1e-3)
    assert result["by_lang"]["ja"] == {"n": 1, "accuracy": 0.0}
    assert result["by_intent"]["order_status"]["accuracy"] == 0.5
    assert result["routes"] == {"template": {"template": 1}, "edge": {"model": 1}, "model": {"model": 1}}
    assert math.isclose(result["route_agreement"], 2 / 3, rel_tol=1e-3)
    assert "| ja | 1 | 0.000 |" in report(result)


def test_bad_rows_are_refused_with_the_allowed_values(tmp_path):
    bad = tmp_path / "golden.csv"
    bad.write_text(GOLDEN.read_text(encoding="utf-8").splitlines()[0] + "\nhello,order_status,en,fast,typical\n")
    with pytest.raises(ValueError, match="'fast'.*template"):
        load(bad)


def test_every_boundary_rule_has_golden_cases():
    from models.taxonomy import load as load_taxonomy

    golden = {(i.text, i.intent, i.lang) for i in ITEMS if i.case == "boundary"}
    examples = {(e.text, e.label, e.lang) for b in load_taxonomy().boundaries for e in b.examples}
    assert examples == golden
    assert all(len(b.examples) >= 2 for b in load_taxonomy().boundaries)
