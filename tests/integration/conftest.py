"""The real-vLLM tier: the CPU default graph with the bundled default model, started once."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import classify_args, deploy, wait_healthy


@pytest.fixture(scope="session")
def app(ray_serve, default_model_dir) -> httpx.Client:
    """The CPU default graph with the bundled default model."""
    client = deploy(ray_serve, "main", classify_args(default_model_dir))
    wait_healthy(client)
    yield client
    client.close()
