"""Full queues on the fake-engine graph: each bounded queue turns overload into a fast
JSON answer (503 with Retry-After, or degraded), never a lost ticket."""

import concurrent.futures as cf

import httpx
import pytest

from deployments.config import EDGE_OFF
from serve_app import bind_graph
from tests.harness import HTTP_PORT, delete, fake_args, graph_config, graph_options

pytestmark = [pytest.mark.reliability, pytest.mark.drill]


@pytest.mark.parametrize(
    "case, options, sections, expect",
    [
        # The model's queue full, no fallback (edge off): our JSON 503 with Retry-After.
        ("model_503", {"ModelReplica": {"max_ongoing_requests": 1, "max_queued_requests": 1}}, {"edge": "off"}, 503),
        # Same with the pre-classifier on: the overflow is answered degraded instead.
        (
            "model_degraded",
            {"ModelReplica": {"max_ongoing_requests": 1, "max_queued_requests": 1}},
            {"edge": {"templates_enabled": False, "cache_enabled": False, "pre_classifier_intents": []}},
            "degraded",
        ),
        # A full queue mid-chain: the tokenizer is skipped, the replica tokenizes itself
        # (its own wait bound off, so every ticket it gets is answered).
        (
            "tokenizer",
            {"Tokenizer": {"max_ongoing_requests": 1, "max_queued_requests": 1}},
            {"topology": "chain", "edge": "off", "model": {"queue_per_slot": None}},
            200,
        ),
        # The ingress sheds what it cannot hold before doing any work.
        (
            "ingress",
            {},
            {
                "edge": "off",
                "ingress": {"admission": {"enabled": False, "min_limit": 1, "initial_limit": 4, "max_limit": 4}},
            },
            503,
        ),
    ],
)
def test_overload_turns_into_fast_answers_never_lost(ray_serve, default_model_dir, case, options, sections, expect):
    sections = {k: EDGE_OFF if v == "off" else v for k, v in sections.items()}
    # A model-like 50 ms per answer: a queue of one fills under 32 clients.
    engine = {**fake_args(default_model_dir)["model"]["engine"], "fake_latency_ms": 50}
    sections["model"] = {**sections.get("model", {}), "engine": engine}
    name = f"tight-{case.replace('_', '-')}"
    ray_serve.run(
        bind_graph(graph_config(name, fake_args(default_model_dir, **sections)), graph_options(options)),
        name=name,
        route_prefix=f"/{name}",
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{HTTP_PORT}/{name}", timeout=60) as client:
            with cf.ThreadPoolExecutor(32) as pool:
                answers = list(
                    pool.map(
                        lambda i: client.post("/v1/classify", json={"text": f"I was charged twice for order {i}"}),
                        range(96),
                    )
                )
        statuses = [r.status_code for r in answers]
        assert set(statuses) <= {200, 503}, statuses  # nothing lost, nothing else
        assert statuses.count(200) > 0
        rejected = [r for r in answers if r.status_code == 503]
        assert all(r.json()["error"]["code"] == "overloaded" and r.headers["retry-after"] == "1" for r in rejected)
        if expect == 503:
            assert rejected
        elif expect == 200:
            assert not rejected
        else:
            assert not rejected and any(r.json()["degraded"] and r.json()["route"] == "degraded" for r in answers)
    finally:
        delete(ray_serve, name)
