"""The fake-engine tier: the whole graph (HTTP, anti-spam, edge, tokenizer, replica
controls, breaker, canary, review) around deployments/fake_engine.py instead of vLLM."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import deploy, fake_args, wait_healthy


@pytest.fixture(scope="package")
def app(ray_serve, default_model_dir) -> httpx.Client:
    """The CPU default graph on the fake engine, chain topology (tests read the edge router's
    and anti-spam filter's own deployments), gone before the real-vLLM tier starts:
    its replicas' control loops would take CPU from that tier's timing-sensitive tests."""
    client = deploy(ray_serve, "fake-main", fake_args(default_model_dir, topology="chain"))
    wait_healthy(client)
    yield client
    client.close()
    ray_serve.delete("fake-main")
