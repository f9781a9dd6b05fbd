"""The fake-engine tier: the whole graph (HTTP, anti-spam, edge, tokenizer, replica
controls, breaker, canary, review) around deployments/engines/fake.py instead of vLLM."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, delete, deploy, fake_args, wait_healthy


@pytest.fixture(scope="package")
def app(ray_serve, default_model_dir) -> Iterator[httpx.Client]:
    """The CPU default graph on the fake engine, shipped topology, admin API on
    (ADMIN_TOKEN: tests read the edge stages' state there), shared by the modules that
    need no settings of their own (a deploy costs 15-30 s here); gone before the
    real-vLLM tier starts: its replicas' control loops would take CPU from that tier's
    timing-sensitive tests."""
    client = deploy(ray_serve, "fake-main", fake_args(default_model_dir, admin={"token": ADMIN_TOKEN}))
    wait_healthy(client)
    yield client
    client.close()
    delete(ray_serve, "fake-main")
