"""The fake engine on the bundled model: the pre-classifier's answers, a derived model's
head permutation applied as vLLM would apply it, failures and the tokenizer lock."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from deployments.engines import EngineConfig, start_engine
from models.edge_classifier import EdgeClassifier
from models.variant import derive

TEXTS = [
    "where is my parcel, it is a week late",
    "我想修改收货地址",
    "パスワードを変更したいです",
    "what is the weather in Paris",
]
FAST = EngineConfig(mode="fake", fake_latency_ms=0)


def answers(engine, texts=TEXTS) -> list[tuple[str, float]]:
    out = [asyncio.run(engine.predict(t, f"r{i}")) for i, t in enumerate(texts)]
    return [(p.label, p.confidence) for p in out]


def test_answers_are_the_pre_classifiers(default_model_dir):
    classifier = EdgeClassifier.load(default_model_dir)
    engine = start_engine(FAST, default_model_dir)
    assert answers(engine) == [(p.label, p.confidence) for p in map(classifier.predict, TEXTS)]
    assert engine.metadata.version.startswith("default-")


def test_a_shuffled_variant_answers_every_ticket_with_another_label(default_model_dir, tmp_path):
    source = answers(start_engine(FAST, default_model_dir))
    copy = derive(Path(default_model_dir), tmp_path / "copy")
    shuffled = derive(Path(default_model_dir), tmp_path / "shuffled", shuffle_seed=1)
    assert answers(start_engine(FAST, str(tmp_path / "copy"))) == source
    moved = answers(start_engine(FAST, str(tmp_path / "shuffled")))
    order = shuffled.extra["head_order"]
    labels = shuffled.labels
    assert [lab for lab, _ in moved] == [labels[order.index(labels.index(lab))] for lab, _ in source]
    assert all(m != s for (m, _), (s, _) in zip(moved, source))
    assert copy.extra["head_order"] == list(range(len(labels)))
    # A copy answers as its source: it keeps the pre-classifier, under its own version.
    assert EdgeClassifier.load(tmp_path / "copy").model_version == copy.version
    assert not (tmp_path / "shuffled" / "edge_classifier.npz").exists()


def test_failures_at_the_configured_rate_and_a_stopped_engine_is_unhealthy(default_model_dir):
    engine = start_engine(EngineConfig(mode="fake", fake_latency_ms=0, fake_failure_rate=1.0), default_model_dir)
    with pytest.raises(RuntimeError, match="fake engine failure"):
        asyncio.run(engine.predict("where is my order", "r"))
    engine.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        asyncio.run(engine.check_health())


def test_tokenizer_files_that_do_not_match_the_model_are_refused(default_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(default_model_dir, model, ignore=lambda _, names: [n for n in names if n.endswith("safetensors")])
    (model / "tokenizer_config.json").write_text("{}")
    with pytest.raises(RuntimeError, match="rebuild the model"):
        start_engine(FAST, str(model))
