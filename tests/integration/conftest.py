"""The real-vLLM tier: the CPU default graph with the bundled default model, started once."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, classify_args, deploy, wait_healthy


@pytest.fixture(scope="session")
def app(ray_serve, default_model_dir) -> Iterator[httpx.Client]:
    """The CPU default graph with the bundled default model, as shipped (fused topology,
    stage state in /admin/state); the chain runs with vLLM in the observability graph."""
    args = classify_args(default_model_dir, admin={"token": ADMIN_TOKEN})
    client = deploy(ray_serve, "main", args)
    wait_healthy(client)
    yield client
    client.close()
