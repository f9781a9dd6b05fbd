"""The tokenizer deployment on the fake-engine graph: one that does not answer in time is
skipped (the replica reads the raw text); one of another model refuses to start."""

import pytest
from ray import serve

from deployments.config import EDGE_OFF
from models.artifacts import tokenizer_hash
from serve_app import build_app
from tests.harness import deploy, fake_args, long_ticket


def test_tokenizer_timeout_falls_back_to_raw_text(ray_serve, default_model_dir):
    client = deploy(
        ray_serve,
        "fallback",
        fake_args(default_model_dir, topology="chain", tokenizer={"timeout_ms": 0.001}, edge=EDGE_OFF),
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
    args = fake_args(default_model_dir, topology="chain", tokenizer={"tokenizer_dir": tiny_decoder_dir})
    try:
        with pytest.raises(RuntimeError, match="Tokenizer"):
            ray_serve.run(build_app(args), name="mismatch", route_prefix="/mismatch")
        # What `serve status` shows the operator:
        msg = ray_serve.status().applications["mismatch"].deployments["Tokenizer"].message
        assert "tokenizer mismatch" in msg
        assert tokenizer_hash(default_model_dir) in msg and tokenizer_hash(tiny_decoder_dir) in msg
    finally:
        ray_serve.delete("mismatch")
