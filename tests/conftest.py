"""Test tiers by folder: tests/unit (pure logic, no Ray), tests/graph (real Ray and Serve,
the fake engine: the graph around the model) and tests/integration (real Ray, Serve and
vLLM engines, each costing 20-50 s to start). Ray and Serve start once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.build import BUNDLED_DATA, BUNDLED_INTENTS, DEFAULT_OUT, TrainSettings, build
from models.tiny_decoder import build_tiny_decoder
from tests.harness import HTTP_PORT, METRICS_PORT

TIERS = ("unit", "graph", "integration")  # folder = marker


def pytest_collection_modifyitems(config, items):
    """Marks each test with its tier (and a unit test that needs no built default model
    `model_free`: scripts/test.sh runs those while the model builds), and runs the tests
    on a tier's shared graph (the fixture `app` of tests/graph and of tests/integration)
    last in their tier: that graph comes up after the tier's other graphs are gone and is
    deleted with the tier, instead of idling beside them for minutes (six to nine replicas
    take ~0.1 core idle here; the real-vLLM one sat beside the KV-cache, LLM-regime and
    observability graphs)."""
    root = Path(__file__).parent
    tiers: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        folder = Path(item.fspath).relative_to(root).parts[0]
        if folder in TIERS:
            item.add_marker(getattr(pytest.mark, folder))
            tiers.setdefault(folder, []).append(i)
        if folder == "unit" and "default_model_dir" not in item.fixturenames:
            item.add_marker(pytest.mark.model_free)
    for slots in tiers.values():
        tier = [items[i] for i in slots]
        ordered = [t for t in tier if "app" not in t.fixturenames] + [t for t in tier if "app" in t.fixturenames]
        for i, item in zip(slots, ordered):
            items[i] = item


@pytest.fixture(scope="session")
def default_model_dir() -> str:
    build(BUNDLED_DATA, "text", "label", DEFAULT_OUT, BUNDLED_INTENTS, TrainSettings())
    return str(DEFAULT_OUT)


@pytest.fixture(scope="session")
def tiny_decoder_dir(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("models") / "tiny-decoder"
    build_tiny_decoder(out)
    return str(out)


@pytest.fixture(scope="session")
def llm_regime_dir(tmp_path_factory) -> str:
    """The LLM-sized regime's decoder at its tiny shape, with its edge pre-classifier (the
    build trains one, ~25 s: two tests of the real-vLLM tier share it)."""
    out = tmp_path_factory.mktemp("models") / "llm-tiny"
    build_tiny_decoder(out, edge_classifier=True)
    return str(out)


@pytest.fixture(scope="session")
def ray_serve():
    import ray
    from ray import serve

    from deployments.ray_env import apply_ray_env

    apply_ray_env()
    # "local": a cluster of the tests' own even where another Ray runs on this machine (the
    # head scripts/serve.sh starts and leaves up, a RAY_ADDRESS): ray.init() alone would join
    # that one, and refuses num_cpus there.
    ray.init(
        address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, _metrics_export_port=METRICS_PORT
    )
    serve.start(http_options={"host": "127.0.0.1", "port": HTTP_PORT})
    yield serve
    serve.shutdown()
    ray.shutdown()
