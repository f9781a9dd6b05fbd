"""Tokenizer fallback, tokenizer/model version lock, and the generate engine mode."""

import pytest
from ray import serve

from deployments.config import EDGE_OFF
from tests.harness import classify_args, deploy, generate_args, long_ticket, wait_healthy


def test_tokenizer_counts_tokenized_requests(app):
    stats_before = serve.get_deployment_handle("Tokenizer", "main").stats.remote().result()
    r = app.post("/v1/classify", json={"text": "my refund for the blue jacket please", "tenant": "tokenizer-test"})
    assert r.status_code == 200 and r.json()["route"] == "model"
    stats = serve.get_deployment_handle("Tokenizer", "main").stats.remote().result()
    assert stats["tokenized"] == stats_before["tokenized"] + 1
    assert stats["max_tokens"] == 512  # min(2048 configured, MiniLM's 512 positions)


def test_tokenizer_timeout_falls_back_to_raw_text(ray_serve, default_model_dir):
    client = deploy(
        ray_serve, "fallback", classify_args(default_model_dir, tokenizer={"timeout_ms": 0.001}, edge=EDGE_OFF)
    )
    try:
        r = client.post("/v1/classify", json={"text": "I forgot my password, how do I reset it?"})
        assert r.status_code == 200 and r.json()["label"] == "password_reset"
        long = client.post("/v1/classify", json={"text": long_ticket(9000)})
        assert long.status_code == 200  # the replica truncates what it tokenizes itself
        stats = serve.get_deployment_handle("Tokenizer", "fallback").stats.remote().result()
        assert stats["fallback"] == 2 and stats["tokenized"] == 0
    finally:
        client.close()
        ray_serve.delete("fallback")


def test_tokenizer_hash_mismatch_refuses_to_start(ray_serve, default_model_dir, tiny_decoder_dir):
    from serve_app import build_app

    args = generate_args(tiny_decoder_dir, tokenizer={"tokenizer_dir": default_model_dir})
    try:
        with pytest.raises(RuntimeError, match="Tokenizer"):
            ray_serve.run(build_app(args), name="mismatch", route_prefix="/mismatch")
        # What `serve status` shows the operator:
        msg = ray_serve.status().applications["mismatch"].deployments["Tokenizer"].message
        assert "tokenizer mismatch" in msg
        from models.artifacts import tokenizer_hash

        assert tokenizer_hash(default_model_dir) in msg and tokenizer_hash(tiny_decoder_dir) in msg
    finally:
        ray_serve.delete("mismatch")


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
