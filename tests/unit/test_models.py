import csv
from collections import Counter
from pathlib import Path

import pytest
import yaml

from models.artifacts import OUT_OF_SCOPE, ModelMetadata, tokenizer_hash
from models.build import (
    BUNDLED_DATA,
    BUNDLED_INTENTS,
    OOS_EVAL,
    TrainSettings,
    fingerprint,
    is_validation,
    read_rows_with_lang,
    read_tiers,
    training_precision,
)


def _write_csv(path, rows, header=("text", "label")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])


def test_bundled_data_covers_every_intent_in_three_languages_and_out_of_scope_text():
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    intents = {item["name"] for item in yaml.safe_load(BUNDLED_INTENTS.read_text())}
    assert len(intents) >= 25
    assert {r["label"] for r in rows} == intents | {OUT_OF_SCOPE}
    for intent in intents:
        per_lang = Counter(r["lang"] for r in rows if r["label"] == intent)
        assert per_lang["en"] >= 30 and per_lang["zh"] >= 20 and per_lang["ja"] >= 20, (intent, per_lang)
    oos = Counter(r["lang"] for r in rows if r["label"] == OUT_OF_SCOPE)
    assert min(oos[lang] for lang in ("en", "zh", "ja")) >= 300, oos
    assert len({r["text"] for r in rows}) == len(rows)


def test_out_of_scope_evaluation_set_is_held_out():
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        training = {r["text"].strip().casefold() for r in csv.DictReader(f)}
    with open(OOS_EVAL, encoding="utf-8") as f:
        held_out = list(csv.DictReader(f))
    assert Counter(r["lang"] for r in held_out) == {"en": 120, "zh": 120, "ja": 120}
    assert {r["label"] for r in held_out} == {OUT_OF_SCOPE}
    assert not {r["text"].strip().casefold() for r in held_out} & training


def test_read_rows_names_missing_columns(tmp_path):
    path = tmp_path / "d.csv"
    _write_csv(path, [("hi", "a"), ("yo", "b")], header=("utterance", "intent"))
    with pytest.raises(SystemExit, match="intent"):
        read_rows_with_lang(path, "text", "label")
    # No lang column: every row's language is "".
    assert read_rows_with_lang(path, "utterance", "intent") == [("hi", "a", ""), ("yo", "b", "")]


def test_read_rows_drops_blank_rows_and_needs_two_labels(tmp_path):
    path = tmp_path / "d.csv"
    _write_csv(path, [("hi", "a"), ("  ", "a"), ("x", "")])
    with pytest.raises(SystemExit, match="two labels"):
        read_rows_with_lang(path, "text", "label")


def test_labels_without_a_tier_are_regular():
    tiers = read_tiers(BUNDLED_INTENTS, ["password_reset", "made_up", OUT_OF_SCOPE])
    assert tiers == {"password_reset": "simple", "made_up": "regular", OUT_OF_SCOPE: "reserved"}
    assert read_tiers(None, ["x"]) == {"x": "regular"}


def test_fingerprint_changes_with_data_and_settings(tmp_path):
    from models.build import base_model_dir

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _write_csv(a, [("hi", "x"), ("yo", "y")])
    _write_csv(b, [("hi", "x"), ("yo", "z")])
    base = base_model_dir("minilm")
    fa = fingerprint(a, TrainSettings(), base)
    assert fa == fingerprint(a, TrainSettings(), base)
    assert fa != fingerprint(b, TrainSettings(), base)
    assert fa != fingerprint(a, TrainSettings(epochs=1), base)
    assert fa != fingerprint(a, TrainSettings(base="minilm"), base)
    assert fingerprint(a, TrainSettings(precision="bf16"), base) != fingerprint(
        a, TrainSettings(precision="fp32"), base
    )


def test_auto_precision_is_the_one_this_cpu_multiplies_natively_and_is_fingerprinted_as_such(tmp_path):
    from models.build import base_model_dir

    assert training_precision(TrainSettings(), {"fpu", "avx512f", "avx512_bf16"}) == "bf16"
    assert training_precision(TrainSettings(), {"fpu", "amx_bf16"}) == "bf16"
    assert training_precision(TrainSettings(), {"fpu", "avx512f", "avx2"}) == "fp32"
    assert training_precision(TrainSettings(precision="fp32"), {"avx512_bf16"}) == "fp32"
    assert training_precision(TrainSettings(precision="bf16"), set()) == "bf16"
    native = training_precision(TrainSettings())
    assert native == training_precision(TrainSettings(), set(Path("/proc/cpuinfo").read_text().split()))
    data = tmp_path / "a.csv"
    _write_csv(data, [("hi", "x"), ("yo", "y")])
    base = base_model_dir("minilm")
    assert fingerprint(data, TrainSettings(), base) == fingerprint(data, TrainSettings(precision=native), base)
    with pytest.raises(SystemExit, match="'fp16'.*auto, bf16, fp32"):
        training_precision(TrainSettings(precision="fp16"))


def test_validation_split_is_a_stable_share_of_every_language_and_label():
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    held = [r for r in rows if is_validation(r["text"])]
    assert 0.12 < len(held) / len(rows) < 0.18
    assert {r["lang"] for r in held} == {"en", "zh", "ja"} and OUT_OF_SCOPE in {r["label"] for r in held}
    assert [is_validation(r["text"]) for r in rows] == [is_validation(r["text"]) for r in rows]


def test_tokenizer_hash_follows_tokenizer_files_only(tmp_path):
    (tmp_path / "vocab.txt").write_text("a\nb\n")
    (tmp_path / "config.json").write_text("{}")
    h = tokenizer_hash(tmp_path)
    (tmp_path / "config.json").write_text('{"changed": 1}')
    assert tokenizer_hash(tmp_path) == h
    (tmp_path / "vocab.txt").write_text("a\nc\n")
    assert tokenizer_hash(tmp_path) != h
    with pytest.raises(FileNotFoundError):
        tokenizer_hash(tmp_path / "nothing")


def test_metadata_round_trip_and_missing_file_message(tmp_path):
    meta = ModelMetadata(version="v1", labels=["a", "b"], tiers={"a": "simple"}, tokenizer_hash="abc")
    meta.save(tmp_path)
    assert ModelMetadata.load(tmp_path) == meta
    with pytest.raises(FileNotFoundError, match="models.build"):
        ModelMetadata.load(tmp_path / "missing")


def test_length_batches_cover_every_row_once_with_less_padding():
    import random

    from models.build import length_batches

    random.seed(0)
    lengths = [random.randint(5, 120) for _ in range(1000)]
    batches = length_batches(lengths, 32)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert len(batches) == 32 and max(len(b) for b in batches) == 32
    order = list(range(1000))
    plain = [order[i : i + 32] for i in range(0, 1000, 32)]
    padded = lambda bs: sum(max(lengths[i] for i in b) * len(b) for b in bs)  # noqa: E731
    assert padded(batches) < 0.8 * padded(plain)


def test_edge_classifier_fitted_on_used_columns_answers_as_a_fit_on_all_of_them():
    from sklearn.linear_model import LogisticRegression

    from models.edge_classifier import N_FEATURES, _matrix, featurize, train_edge_classifier

    rows = [
        ("where is my parcel", "order_status"),
        ("my order has not arrived", "order_status"),
        ("我的包裹在哪里", "order_status"),
        ("I forgot my password", "password_reset"),
        ("reset my password please", "password_reset"),
        ("パスワードを忘れました", "password_reset"),
        ("refund my money", "refund_request"),
        ("I want a refund", "refund_request"),
    ]
    labels = ["order_status", "password_reset", "refund_request"]
    edge, _ = train_edge_classifier(rows, labels, "v", c=1.0)
    full = LogisticRegression(C=1.0, max_iter=2000).fit(
        _matrix([t for t, _ in rows]), [labels.index(y) for _, y in rows]
    )
    used = {int(i) for t, _ in rows for i in featurize(t)[0]}
    assert not edge._coef_t[sorted(set(range(N_FEATURES)) - used)].any()
    for text in ["where is my order", "password forgotten", "退款", "hello there"]:
        want = full.predict_proba(_matrix([text]))[0]
        got = edge.predict(text)
        assert got.label == labels[int(want.argmax())] and abs(got.confidence - want.max()) < 1e-3, (text, got, want)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_layers_above_frozen_ones_read_what_the_whole_encoder_reads(pooling):
    """Frozen layers' states computed once, then the layers above them: the pooled
    features of the whole encoder on the text (eval mode: no dropout)."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from models.build import _batches, base_model_dir, pooled_state
    from models.frozen import bottom_states, top_pooled

    base = base_model_dir("minilm")
    tokenizer = AutoTokenizer.from_pretrained(base)
    assert tokenizer is not None
    model = BertForSequenceClassification.from_pretrained(base, num_labels=2).eval()
    texts = ["where is my order", "hi", "I was charged twice for one order last week, please refund one of them"]
    states = bottom_states(model, _batches(tokenizer, texts, TrainSettings(batch_size=2)), 3)
    assert [len(s) for s in states] == [len(ids) for ids in tokenizer(texts)["input_ids"]]
    with torch.no_grad():
        whole = pooled_state(model, tokenizer(texts, padding=True, return_tensors="pt"), pooling)
        torch.testing.assert_close(top_pooled(model, states, 3, pooling), whole, atol=1e-5, rtol=1e-4)


def test_frozen_layers_are_refused_where_they_cannot_train():
    from models.build import base_model_dir, train

    base = base_model_dir("minilm")  # 6 layers; its English vocabulary lacks most Chinese characters
    with pytest.raises(SystemExit, match="--frozen-layers 7: minilm has 0 to 6 layers"):
        train([("hi", "a"), ("yo", "b")], ["a", "b"], base, TrainSettings(base="minilm", frozen_layers=7))
    with pytest.raises(SystemExit, match="--frozen-layers 2: minilm's vocabulary lacks"):
        train([("退款", "a"), ("yo", "b")], ["a", "b"], base, TrainSettings(base="minilm", frozen_layers=2))
