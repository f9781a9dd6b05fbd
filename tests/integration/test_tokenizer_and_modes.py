"""The tokenizer in front of the real engine, and the generate engine mode (the tokenizer's
fallback and version lock are tests/graph/test_tokenizer.py)."""

from ray import serve

from deployments.config import EDGE_OFF
from tests.harness import deploy, generate_args, long_ticket, wait_healthy


def test_tokenizer_counts_tokenized_requests(app):
    stats_before = serve.get_deployment_handle("Tokenizer", "main").stats.remote().result()
    r = app.post("/v1/classify", json={"text": "my refund for the blue jacket please", "tenant": "tokenizer-test"})
    assert r.status_code == 200 and r.json()["route"] == "model"
    stats = serve.get_deployment_handle("Tokenizer", "main").stats.remote().result()
    assert stats["tokenized"] == stats_before["tokenized"] + 1
    assert stats["max_tokens"] == 512  # min(2048 configured, MiniLM's 512 positions)


def test_generate_mode_answers_one_of_the_labels(ray_serve, tiny_decoder_dir):
    client = deploy(ray_serve, "generate", generate_args(tiny_decoder_dir, edge=EDGE_OFF))
    try:
        wait_healthy(client)
        labels = {item["name"] for item in client.get("/v1/labels").json()["labels"]}
        for text in ["where is my refund", "我忘记密码了", "cancel it now!!!", long_ticket(3000)]:
            r = client.post("/v1/classify", json={"text": text})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["label"] in labels and body["route"] == "model"
            assert body["model_version"].startswith("tiny-decoder")
    finally:
        client.close()
        ray_serve.delete("generate")
