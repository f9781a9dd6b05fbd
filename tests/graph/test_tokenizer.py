"""The tokenizer stage on the fake-engine graph, in the shipped fused topology (built inside
the ingress, same class as the chain's Tokenizer deployment): one that does not answer in
time is skipped (the replica reads the raw text); one of another model refuses to start."""

import pytest

from deployments.config import EDGE_OFF
from models.artifacts import tokenizer_hash
from serve_app import bind_graph
from tests.harness import ADMIN_TOKEN, delete, deploy, fake_args, graph_config, long_ticket


def test_tokenizer_timeout_falls_back_to_raw_text(ray_serve, default_model_dir):
    args = fake_args(default_model_dir, tokenizer={"timeout_ms": 0.001}, edge=EDGE_OFF, admin={"token": ADMIN_TOKEN})
    client = deploy(ray_serve, "fallback", args)
    try:
        r = client.post("/v1/classify", json={"text": "I forgot my password, how do I reset it?"})
        assert r.status_code == 200 and r.json()["label"] == "password_reset"
        long = client.post("/v1/classify", json={"text": long_ticket(9000)})
        assert long.status_code == 200  # the replica truncates what it tokenizes itself
        state = client.get("/admin/state", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
        assert state["tokenizer"]["fallback"] == 2 and state["tokenizer"]["tokenized"] == 0
    finally:
        client.close()
        delete(ray_serve, "fallback")


# A graph that fails to start: a reliability check, out of the fast tier.
@pytest.mark.reliability
def test_tokenizer_hash_mismatch_refuses_to_start(ray_serve, default_model_dir, tiny_decoder_dir):
    # The shipped fused topology: the ingress builds the tokenizer stage in its own process
    # and refuses to start with it (in the chain the Tokenizer deployment does, same class).
    args = fake_args(default_model_dir, tokenizer={"tokenizer_dir": tiny_decoder_dir})
    # One try shows the refusal; Serve's default retries a failing constructor 3 times.
    retry_once = {"Ingress": {"max_constructor_retry_count": 1}}
    try:
        with pytest.raises(RuntimeError, match="Ingress"):
            ray_serve.run(
                bind_graph(graph_config("mismatch", args), retry_once), name="mismatch", route_prefix="/mismatch"
            )
        # What `serve status` shows the operator:
        msg = ray_serve.status().applications["mismatch"].deployments["Ingress"].message
        assert "tokenizer mismatch" in msg
        assert tokenizer_hash(default_model_dir) in msg and tokenizer_hash(tiny_decoder_dir) in msg
    finally:
        delete(ray_serve, "mismatch")
