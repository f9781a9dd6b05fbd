"""topology: fused: anti-spam filter, edge router and tokenizer inside the ingress replica;
the same answers and refusals as the chain, with three deployments fewer."""

import pytest
from ray import serve

from tests.harness import fake_args, running

APP = "fused"


@pytest.fixture(scope="module")
def fused(ray_serve, default_model_dir):
    args = fake_args(default_model_dir, topology="fused")
    args["antispam"] = {**args["antispam"], "duplicates": {"max_repeats": 3}}
    with running(ray_serve, APP, args) as client:
        yield client


def test_fused_graph_runs_six_deployments_and_reports_every_stage(fused):
    deployments = set(serve.status().applications[APP].deployments)
    assert deployments == {"Ingress", "RateLimiter", "ModelReplica", "Breaker", "ReviewQueue", "CanaryController"}
    nodes = fused.get("/healthz").json()["nodes"]
    assert set(nodes) == {
        "ingress",
        "antispam",
        "edge_router",
        "tokenizer",
        "rate_limiter",
        "model",
        "review_queue",
        "canary_controller",
    }
    assert set(nodes.values()) == {"ok"}


def test_fused_graph_answers_every_route_and_refuses_like_the_chain(fused):
    def send(text: str, user: str = "u1"):
        return fused.post("/v1/classify", json={"text": text, "user_id": user})

    assert send("I forgot my password, how do I reset it?").json()["route"] == "template"
    first = send("the zipper of my new jacket broke after one day")
    assert first.status_code == 200 and first.json()["route"] == "model"
    assert send("the zipper of my new jacket broke after one day").json()["route"] == "cache"
    spam = send("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    assert spam.status_code == 422 and "repeated_chars" in spam.json()["error"]["message"]
    answers = [send("is there any discount for students on shoes", user="dup").status_code for _ in range(5)]
    assert answers[:3] == [200, 200, 200] and answers[3:] == [422, 422]
    tokenized = send("my parcel arrived wet and the box was torn open")
    assert tokenized.status_code == 200 and tokenized.json()["route"] in ("model", "edge_model")
