"""The real-vLLM tier: the CPU default graph with the bundled default model, started once."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import classify_args, deploy, wait_healthy


@pytest.fixture(scope="session")
def app(ray_serve, default_model_dir) -> httpx.Client:
    """The CPU default graph with the bundled default model, chain topology: the real-vLLM
    tier's one graph with the tokenizer as a deployment of its own."""
    # No host-CPU trigger on the breaker (80 % for 60 s: reject_new): the other graphs of
    # this tier (KV cache, observability) keep both cores hot for minutes, which the idle
    # main graph's breaker reads as its own; the likely cause of a recurring 503 in the
    # tier's last test, right after those graphs' teardown.
    client = deploy(
        ray_serve, "main", classify_args(default_model_dir, topology="chain", breaker={"cpu_reject_percent": None})
    )
    wait_healthy(client)
    yield client
    client.close()
