"""The edge router answers for the model it was deployed with: its version, labels and
gates come from its own model directory, and a model answer of another version (a
replica of the other generation during a rolling upgrade) is never served as its own;
a directory rebuilt in place is adopted. Small stand-in handles, no Ray."""

import asyncio
from pathlib import Path

from deployments.api import Answer, ModelAnswer, Refusal, Ticket
from deployments.config import EDGE_OFF, EdgeConfig
from deployments.edge_router import EdgeRouter
from deployments.in_process import construct
from models.artifacts import ModelMetadata
from models.variant import derive
from policies.breaker import BreakerConfig
from policies.retry import RetryConfig
from tests.unit.test_model_path import Handle

TEXT = "the zipper of my new jacket broke after one day"


def classify(model_dir: str, versions: list[str], edge: dict, before=lambda: None) -> Answer | Refusal:
    """One ticket through a router on `model_dir` whose model replicas answer as `versions`,
    one call after another (the last one repeats); `before` runs once the router is up. The
    stand-in model has no `labels` method: the router must not need one to start."""
    label = ModelMetadata.load(model_dir).labels[0]

    async def main():
        model = Handle(predict=[ModelAnswer(label, 0.9, v) for v in versions])
        router = await construct(
            EdgeRouter,
            EdgeConfig(**edge),
            Handle(tokenize=[[1, 2, 3]]),
            model,
            model_dir,
            None,
            BreakerConfig(enabled=False),
            RetryConfig(),
        )
        before()
        return await router.classify(Ticket(text=TEXT, request_id="r1"))

    return asyncio.run(main())


def test_an_answer_of_another_version_is_never_served(default_model_dir):
    own = ModelMetadata.load(default_model_dir).version
    degraded = classify(default_model_dir, ["other-generation"], {**EDGE_OFF, "pre_classifier_enabled": True})
    assert isinstance(degraded, Answer) and degraded.route == "degraded" and degraded.model_version == own
    refused = classify(default_model_dir, ["other-generation"], EDGE_OFF)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (503, "overloaded")
    assert refused.retry_after_s
    served = classify(default_model_dir, [own], EDGE_OFF)
    assert isinstance(served, Answer) and served.route == "model" and served.model_version == own
    # The retry (the unavailable row's second try) meets a replica of its own generation.
    retried = classify(default_model_dir, ["other-generation", own], EDGE_OFF)
    assert isinstance(retried, Answer) and retried.route == "model" and retried.model_version == own


def test_a_directory_rebuilt_in_place_is_adopted(default_model_dir, tmp_path):
    model_dir = tmp_path / "model"
    derive(Path(default_model_dir), model_dir)

    def rebuild():
        meta = ModelMetadata.load(model_dir)
        meta.version = "rebuilt"
        meta.save(model_dir)

    answer = classify(str(model_dir), ["rebuilt"], EDGE_OFF, before=rebuild)
    assert isinstance(answer, Answer) and answer.route == "model" and answer.model_version == "rebuilt"
