"""Noise, the calibration mix with its held-back styles, the review trade-off, the answer
digest behind a model version, the taxonomy and the Bitext mapping."""

import csv
import subprocess
import sys

import numpy as np
import pytest
import yaml

from loadkit.bitext import BITEXT_LABELS, UNMAPPED, ExternalTicket
from models import noise, taxonomy
from models.artifacts import OUT_OF_SCOPE, answer_digest
from models.build import (
    BUNDLED_DATA,
    BUNDLED_INTENTS,
    HELD_BACK_STYLES,
    calibration_mix,
    calibration_split,
    held_back_texts,
    with_noisy_copies,
)
from models.calibration import review_tradeoff


def test_noise_is_deterministic_and_changes_english_text_in_its_three_ways():
    text = "Please reset the password of my account, I forgot it because I was away."
    assert noise.variant(text, "flat") == "please reset the password of my account i forgot it because i was away"
    assert noise.variant(text, "texting").startswith("pls reset the pwd of my acct")
    slipped = noise.variant(text, "typos")
    assert slipped != text and len(slipped.split()) == len(text.split())
    assert all(noise.noisy(text, "en", seed=s) == noise.noisy(text, "en", seed=s) for s in range(5))
    # A typo draw can miss every word of a short text; most variants differ.
    assert sum(noise.noisy(f"{text} {i}", "en") != f"{text} {i}" for i in range(20)) >= 15


def test_noise_keeps_order_numbers_and_leaves_cjk_letters_alone():
    assert "#a10293" in noise.variant("Where is order #A10293?", "flat")
    assert noise.noisy("我想修改我的密码。", "zh") == "我想修改我的密码"
    assert noise.noisy("パスワードを忘れました！", "ja") == "パスワードを忘れました"


def test_held_back_styles_are_never_trained_on_and_make_a_part_of_the_mix(tmp_path):
    path = tmp_path / "d.csv"
    rows = [
        ("clean one", "a", "en", ""),
        ("um so like cancel it", "a", "en", "voice"),
        ("my mum wants x", "b", "en", "third_person"),
    ]
    rows += [(f"row {i}", "ab"[i % 2], "en", "fragment") for i in range(60)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label", "lang", "style"), *rows])
    held = held_back_texts(path)
    assert held == {"um so like cancel it", "my mum wants x"} and {"voice", "third_person"} == HELD_BACK_STYLES
    train, val = calibration_split([r[:3] for r in rows], held)
    assert not {t for t, _, _ in train} & held and held <= {t for t, _, _ in val}
    assert 0 < len(val) - len(held) < len(rows) // 3
    mix = calibration_mix(val, held)
    assert {t for t, _, _ in mix["held_back_styles"]} == held
    assert not {t for t, _, _ in mix["clean"]} & held
    assert all(n[0] != c[0] and n[1:] == c[1:] for n, c in zip(mix["noisy"], mix["clean"]))


def test_bundled_data_has_100_english_rows_per_intent_and_held_back_styles():
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    intents = [i["name"] for i in yaml.safe_load(BUNDLED_INTENTS.read_text())]
    for intent in intents:
        english = [r for r in rows if r["label"] == intent and r["lang"] == "en"]
        trained = [r for r in english if r["style"] not in HELD_BACK_STYLES]
        assert len(trained) >= 100, (intent, len(trained))
        assert {r["style"] for r in english} >= HELD_BACK_STYLES, intent


def test_noisy_copies_are_added_to_a_share_of_the_rows():
    rows = [(f"Please cancel order number {i} for me", "cancel_order", "en") for i in range(200)]
    out = with_noisy_copies(rows, 0.5, seed=13)
    assert out[:200] == rows and 60 < len(out) - 200 < 140
    assert all(lab == "cancel_order" and t not in {r[0] for r in rows} for t, lab, _ in out[200:])


def test_review_tradeoff_moves_flags_from_wrong_to_right_as_the_threshold_rises():
    conf = np.array([0.95, 0.9, 0.6, 0.4, 0.8, 0.3])
    right = np.array([True, True, True, True, False, False])
    always = np.array([False, False, False, False, False, True])
    never = np.array([False, False, False, True, False, False])
    curve = {t: (rf, wu) for t, rf, wu in review_tradeoff(conf, right, always, never)}
    assert curve[0.0] == (0.0, pytest.approx(1 / 6))  # only out_of_scope flagged
    assert curve[0.7] == (0.25, pytest.approx(1 / 6))  # 0.6 flagged; the template's 0.4 never
    assert curve[0.85] == (0.25, 0.0)
    assert curve[1.0] == (0.75, 0.0)


def test_answer_digest_names_weights_tokenizer_edge_and_thresholds(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "tokenizer.json").write_text("{}")
    settings = {"labels": ["a", "b"], "review_threshold": 0.7}
    digest = answer_digest(tmp_path, settings, b"edge")
    assert digest == answer_digest(tmp_path, dict(reversed(settings.items())), b"edge")
    assert digest != answer_digest(tmp_path, {**settings, "review_threshold": 0.71}, b"edge")
    assert digest != answer_digest(tmp_path, settings, b"edge2")
    (tmp_path / "model.safetensors").write_bytes(b"weightz")
    assert digest != answer_digest(tmp_path, settings, b"edge")


def test_taxonomy_names_only_real_labels_and_its_doc_is_current():
    tax = taxonomy.load()
    names = [d.name for d in tax.labels]
    assert names == [i["name"] for i in yaml.safe_load(BUNDLED_INTENTS.read_text())]
    for d in tax.labels:
        assert d.covers and d.examples and d.description, d.name
    assert {"agent_about_topic", "tracking_is_status", "taken_over_account", "several_requests"} <= {
        b.id for b in tax.boundaries
    }
    meta = tax.as_metadata()
    assert set(meta["labels"]) == set(names) and len(meta["boundaries"]) == len(tax.boundaries)
    check = subprocess.run([sys.executable, "-m", "models.taxonomy", "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_taxonomy_refuses_an_example_with_an_unknown_label(tmp_path):
    bad = tmp_path / "b.yaml"
    bad.write_text(
        yaml.safe_dump(
            [
                {
                    "id": "x",
                    "labels": ["a"],
                    "rule": "r",
                    "why": "w",
                    "examples": [{"text": "t", "label": "nope", "lang": "en"}],
                }
            ]
        )
    )
    with pytest.raises(ValueError, match="'nope'"):
        taxonomy.load(boundaries=bad)


def test_bitext_mapping_uses_only_shipped_labels():
    labels = {i["name"] for i in yaml.safe_load(BUNDLED_INTENTS.read_text())}
    assert {lab for accepted in BITEXT_LABELS.values() for lab in accepted} <= labels
    assert not set(BITEXT_LABELS) & set(UNMAPPED)
    assert OUT_OF_SCOPE not in {lab for accepted in BITEXT_LABELS.values() for lab in accepted}


def test_external_scores_count_flags_per_route_and_leave_unmapped_intents_apart():
    from bench.quality import score_external

    tickets = [
        ExternalTicket("a", "track_order", ("order_status",), "BL"),
        ExternalTicket("b", "track_order", ("order_status",), "B"),
        ExternalTicket("c", "delivery_period", ("order_status", "shipping_options"), "B"),
        ExternalTicket("d", "get_refund", ("refund_request",), "BQ"),
        ExternalTicket("e", "review", (), "B"),
    ]
    answers = [
        {"label": "order_status", "confidence": 1.0, "route": "template"},
        {"label": "order_status", "confidence": 0.5, "route": "model", "needs_review": True},
        {"label": "shipping_options", "confidence": 0.9, "route": "edge_model"},
        {"label": "return_item", "confidence": 0.9, "route": "model"},
        {"label": OUT_OF_SCOPE, "confidence": 0.9, "route": "model", "needs_review": True},
    ]
    out = score_external(tickets, answers)
    assert out["all"] == {"n": 4, "answered": 4, "accuracy": 0.75, "right_flagged": 0.3333, "wrong_unflagged": 0.25}
    assert out["by_route"]["model"]["accuracy"] == 0.5 and out["by_route"]["template"]["right_flagged"] == 0.0
    assert out["by_style_flag"]["Q"]["wrong_unflagged"] == 1.0
    assert out["unmapped"] == {"review": {"answered": 1, "flagged": 1.0, "labels": {OUT_OF_SCOPE: 1}}}
    assert score_external(tickets[:2], [None, answers[1]])["all"]["accuracy"] == 0.5
