import asyncio
import json

import pytest

from deployments.config_loop import RetrainConfig
from deployments.nodes.retrainer import Retrainer, log_tail
from models.build import grow_head
from models.retrain import RetrainSettings, split_reviews, training_rows

REVIEWS = [(f"ticket number {i}", "cancel_order" if i % 2 else "refund_request", "en") for i in range(200)]


def test_the_reviewed_set_is_a_stable_share_by_text_and_never_trained_on():
    learn, held = split_reviews(REVIEWS, 0.2)
    assert 25 <= len(held) <= 55 and len(learn) + len(held) == 200
    assert not {t for t, _, _ in learn} & {t for t, _, _ in held}
    # The queue grows: every item keeps its side.
    more_learn, more_held = split_reviews(
        REVIEWS + [(f"later ticket {i}", "cancel_order", "en") for i in range(50)], 0.2
    )
    assert set(held) <= set(more_held) and set(learn) <= set(more_learn)


def test_a_text_resolved_twice_keeps_its_last_label():
    learn, held = split_reviews(
        [("where is my parcel", "order_status", "en"), ("where is my parcel", "delivery_delay", "en")], 0.5
    )
    assert [label for _, label, _ in learn + held] == ["delivery_delay"]


def test_training_rows_replay_the_bundled_rows_and_weigh_the_reviews():
    bundled = [{"text": f"bundled {i}", "label": "order_status", "lang": "en", "style": "plain"} for i in range(100)]
    reviews = REVIEWS[:10]
    rows = training_rows(bundled, reviews, RetrainSettings(replay_rows=30, review_weight=3))
    assert sum(r["style"] == "plain" for r in rows) == 30
    assert sum(r["style"] == "review" for r in rows) == 30
    assert training_rows(bundled, reviews, RetrainSettings(replay_rows=30)) == training_rows(
        bundled, reviews, RetrainSettings(replay_rows=30)
    )  # seeded
    assert sum(r["style"] == "plain" for r in training_rows(bundled, [], RetrainSettings())) == 100


def test_a_retrain_running_when_the_graph_restarted_is_recorded_as_failed(tmp_path):
    state = tmp_path / "retrain.json"
    run = {
        "run_id": "1",
        "status": "running",
        "started_at": "t",
        "source_dir": "s",
        "candidate_dir": str(tmp_path / "c"),
    }
    done = {**run, "run_id": "0", "status": "succeeded", "candidate_version": "v"}
    state.write_text(json.dumps([done, run]))
    retrainer = Retrainer(RetrainConfig(state_path=str(state)), "store", "model")
    seen = asyncio.run(retrainer.state())
    assert seen["status"] == "failed" and "restarted" in seen["current"]["message"]
    assert [r["status"] for r in seen["runs"]] == ["failed", "succeeded"]


def test_the_log_tail_reads_progress_bars_as_lines(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("start\nstep 1\rstep 2\rstep 3\n\nend\n")
    assert log_tail(log, 3) == ["step 2", "step 3", "end"]
    assert log_tail(tmp_path / "missing.log") == []


def test_a_warm_start_grows_the_head_by_the_accepted_labels_and_keeps_the_trained_rows():
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    known = ["cancel_order", "order_status"]
    config = BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    config.id2label, config.label2id = dict(enumerate(known)), {label: i for i, label in enumerate(known)}
    model = BertForSequenceClassification(config)
    before = model.classifier.weight.detach().clone()

    grow_head(model, ["cancel_order", "gift_cards", "order_status"])
    assert model.num_labels == model.config.num_labels == 3
    assert model.config.label2id == {"cancel_order": 0, "gift_cards": 1, "order_status": 2}
    weight = model.classifier.weight.detach()
    assert torch.equal(weight[0], before[0]) and torch.equal(weight[2], before[1])
    assert not torch.equal(weight[1], torch.zeros(8))
    logits = model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([1])).logits
    assert logits.shape == (1, 3)
    with pytest.raises(SystemExit, match="order_status"):
        grow_head(model, ["cancel_order", "gift_cards"])


def test_a_model_of_another_taxonomy_retrains_on_its_own_rows_and_keeps_its_tiers(tmp_path):
    """A model built from other data (a bank's three labels) replays the rows it was built
    from, never the bundled e-commerce tickets: the candidate knows its labels only, keeps
    their tiers, and carries its source's rows on, without the reviews."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from models.artifacts import TRAINING_DATA_FILE, ModelMetadata
    from models.build import TrainSettings, base_model_dir, build, read_rows_with_lang
    from models.retrain import retrain

    tokenizer = AutoTokenizer.from_pretrained(base_model_dir())
    assert tokenizer is not None
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    phrases = {
        "card_lost": "I lost my card number {i}",
        "balance": "what is the balance of account {i}",
        "out_of_scope": "tell me the weather on day {i}",
    }
    config.id2label = dict(enumerate(sorted(phrases)))
    config.label2id = {label: i for i, label in config.id2label.items()}
    BertForSequenceClassification(config).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    bank = tmp_path / "bank.csv"
    bank.write_text(
        "text,category,lang\n" + "".join(f"{p.format(i=i)},{lab},en\n" for lab, p in phrases.items() for i in range(30))
    )
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text("- {name: balance, tier: simple}\n- {name: card_lost, tier: regular}\n")
    tiny = TrainSettings(epochs=1, frozen_layers=0, precision="fp32", linear_probe=False)
    source = tmp_path / "bank-model"
    build(bank, "text", "category", source, tiers, tiny, warm_start=tmp_path / "tiny")
    built = read_rows_with_lang(source / TRAINING_DATA_FILE, "text", "label")
    assert len(built) == 90 and {lab for _, lab, _ in built} == set(phrases)

    reviews = [(f"my card {i} was stolen yesterday", "card_lost", "en") for i in range(20)]
    meta = retrain(reviews, source, tmp_path / "candidate", RetrainSettings(epochs=1), tiny)
    assert meta.labels == sorted(phrases)
    assert (
        meta.tiers
        == ModelMetadata.load(source).tiers
        == {
            "balance": "simple",
            "card_lost": "regular",
            "out_of_scope": "reserved",
        }
    )
    assert read_rows_with_lang(tmp_path / "candidate" / TRAINING_DATA_FILE, "text", "label") == built
    assert meta.extra["retrain"]["reviews_learnt"] > 10
