import csv

import pytest
import yaml

from models.artifacts import ModelMetadata, tokenizer_hash
from models.build import BUNDLED_DATA, BUNDLED_INTENTS, TrainSettings, fingerprint, read_rows, read_tiers


def _write_csv(path, rows, header=("text", "label")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])


def test_bundled_data_has_at_least_30_examples_for_each_of_25_intents_in_three_languages():
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    intents = {item["name"] for item in yaml.safe_load(BUNDLED_INTENTS.read_text())}
    per_label = {label: sum(r["label"] == label for r in rows) for label in intents}
    assert len(intents) >= 25 and min(per_label.values()) >= 30
    assert {r["label"] for r in rows} == intents
    assert {r["lang"] for r in rows} == {"en", "zh", "ja"}
    assert len({r["text"] for r in rows}) == len(rows)


def test_read_rows_names_missing_columns(tmp_path):
    path = tmp_path / "d.csv"
    _write_csv(path, [("hi", "a"), ("yo", "b")], header=("utterance", "intent"))
    with pytest.raises(SystemExit, match="intent"):
        read_rows(path, "text", "label")
    assert read_rows(path, "utterance", "intent") == [("hi", "a"), ("yo", "b")]


def test_read_rows_drops_blank_rows_and_needs_two_labels(tmp_path):
    path = tmp_path / "d.csv"
    _write_csv(path, [("hi", "a"), ("  ", "a"), ("x", "")])
    with pytest.raises(SystemExit, match="two labels"):
        read_rows(path, "text", "label")


def test_labels_without_a_tier_are_regular():
    tiers = read_tiers(BUNDLED_INTENTS, ["password_reset", "made_up"])
    assert tiers == {"password_reset": "simple", "made_up": "regular"}
    assert read_tiers(None, ["x"]) == {"x": "regular"}


def test_fingerprint_changes_with_data_and_settings(tmp_path):
    from models.build import base_model_dir

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _write_csv(a, [("hi", "x"), ("yo", "y")])
    _write_csv(b, [("hi", "x"), ("yo", "z")])
    base = base_model_dir()
    fa = fingerprint(a, TrainSettings(), base)
    assert fa == fingerprint(a, TrainSettings(), base)
    assert fa != fingerprint(b, TrainSettings(), base)
    assert fa != fingerprint(a, TrainSettings(epochs=1), base)


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
