"""What the default model answers, over HTTP with the edge tier on: out-of-scope tickets
flagged in every language, Chinese and Japanese tickets labelled, the golden set."""

import pytest

from models.artifacts import OUT_OF_SCOPE
from models.golden import evaluate


@pytest.mark.parametrize(
    "text, lang",
    [
        ("what is the weather tomorrow in Paris", "en"),
        ("can you recommend a good recipe for banana bread", "en"),
        ("明天北京会下雨吗？", "zh"),
        ("帮我定一个明天早上七点的闹钟", "zh"),
        ("富士山の高さは何メートルですか", "ja"),
        ("おすすめの映画を教えてください", "ja"),
        # Template words in another service's request: the pre-classifier vetoes the template.
        ("ルーターの管理画面のパスワード忘れた", "ja"),
    ],
)
def test_out_of_scope_tickets_are_answered_out_of_scope_and_flagged(app, text, lang):
    r = app.post("/v1/classify", json={"text": text, "lang": lang, "user_id": "oos-test"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["label"] == OUT_OF_SCOPE and body["needs_review"] is True, body
    assert 0 < body["confidence"] <= 1 and body["route"] in {"model", "cache"}


@pytest.mark.parametrize(
    "text, label",
    [
        ("我的包裹还没有到，已经过了一周了", "delivery_delay"),
        ("收到的杯子碎了，怎么办", "damaged_item"),
        ("我想退货，衣服尺码不合适", "return_item"),
        ("退款申请了五天了，钱还没到账", "track_refund"),
        ("注文した商品がまだ届きません。一週間経ちました", "delivery_delay"),
        ("届いた商品が注文したものと違います", "wrong_item"),
        ("メールマガジンの配信を停止してください", "newsletter_unsubscribe"),
        ("パスワードを変更したいです", "password_reset"),
    ],
)
def test_chinese_and_japanese_tickets_get_their_label(app, text, label):
    r = app.post("/v1/classify", json={"text": text, "user_id": "lang-test"})
    assert r.status_code == 200, r.text
    assert r.json()["label"] == label, r.json()


def test_labels_lists_out_of_scope_as_reserved(app):
    body = app.get("/v1/labels").json()
    assert body["reserved"] == [OUT_OF_SCOPE]
    assert {"name": OUT_OF_SCOPE, "tier": "reserved"} in body["labels"]
    assert 0 < body["review_threshold"] < 1
    assert set(body["edge_min_confidence"]) >= {"en", "zh", "ja", "*"}


def test_golden_set_per_language(app):
    result = evaluate(str(app.base_url), tenant="golden-per-language")
    assert not result["unanswered"]
    # docs/quality.md: 0.97 overall and in each language when built; a drop below these
    # floors is a regression, not a ticket or two of build-to-build noise.
    assert result["accuracy"] >= 0.95, result["by_lang"]
    for lang in ("en", "zh", "ja"):
        assert result["by_lang"][lang]["accuracy"] >= 0.93, result["by_lang"]
    # The boundary rules of docs/labels.md, which the model learned from the bundled rows.
    assert result["by_case"]["boundary"]["accuracy"] >= 0.85, result["by_case"]


def test_served_probabilities_are_the_builds_own_calibrated_forward(app, default_model_dir):
    """vLLM reads the pooling files beside the weights (mean pooling) and serves the
    temperature folded into the classifier: its answers equal the build's forward."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from models.build import TrainSettings, forward

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir)

    assert tokenizer is not None
    model = BertForSequenceClassification.from_pretrained(default_model_dir).eval()
    texts = ["the zipper of my new jacket broke after one day", "我的退款什么时候到账", "注文をキャンセルしたい"]
    with torch.no_grad():
        probs = torch.softmax(
            forward(model, tokenizer(texts, padding=True, return_tensors="pt"), TrainSettings().pooling), dim=-1
        )
    checked = 0
    for text, p in zip(texts, probs):
        body = app.post(
            "/v1/classify", json={"text": text, "user_id": "forward-test"}, headers={"X-Traffic-Color": "stable"}
        ).json()
        if body["route"] != "model":
            continue
        assert body["label"] == model.config.id2label[int(p.argmax())]
        assert abs(body["confidence"] - float(p.max())) < 1e-3, (text, body["confidence"], float(p.max()))
        checked += 1
    assert checked >= 2
