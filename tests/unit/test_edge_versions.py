"""The edge router answers for the model it was deployed with: its version, labels and
gates come from its own model directory. A model answer of another version (a replica of
the other generation during a rolling upgrade) goes out under that version and its review
threshold, and the result cache never serves it as this router's model's; a directory
rebuilt in place is adopted. Small stand-in handles, no Ray."""

import asyncio
from pathlib import Path

from deployments.api import Answer, ModelAnswer, Ticket
from deployments.config import EDGE_OFF, EdgeConfig
from deployments.nodes.edge_router import EdgeRouter
from deployments.nodes.in_process import construct
from models.artifacts import ModelMetadata
from models.variant import derive
from policies.breaker import BreakerConfig
from policies.retry import RetryConfig
from tests.unit.test_model_path import Handle

TEXT = "the zipper of my new jacket broke after one day"
CACHE_ONLY = {**EDGE_OFF, "cache_enabled": True}


def classify(model_dir: str, versions: list[str], edge: dict, before=lambda: None) -> list[Answer]:
    """The same ticket, once per entry of `versions`, through one router on `model_dir`
    whose model replicas answer as those versions, in turn (threshold 0.8 for any version
    but the directory's own); `before` runs once the router is up. The stand-in model has
    no `labels` method: the router must not need one to start."""
    meta = ModelMetadata.load(model_dir)
    label = meta.labels[0]

    async def main():
        model = Handle(
            predict=[
                ModelAnswer(label, 0.9, v, review_threshold=meta.review_threshold if v == meta.version else 0.8)
                for v in versions
            ]
        )
        router = await construct(
            EdgeRouter,
            EdgeConfig(**edge),
            Handle(tokenize=[[1, 2, 3]] * len(versions)),
            model,
            model_dir,
            None,
            BreakerConfig(enabled=False),
            RetryConfig(),
        )
        before()
        return [await router.classify(Ticket(text=TEXT, request_id=f"r{i}")) for i in range(len(versions))]

    return asyncio.run(main())


def test_another_generations_answer_goes_out_under_its_own_version_and_threshold(default_model_dir):
    own = ModelMetadata.load(default_model_dir)
    [other] = classify(default_model_dir, ["other-generation"], EDGE_OFF)
    assert (other.route, other.model_version, other.review_threshold) == ("model", "other-generation", 0.8)
    [served] = classify(default_model_dir, [own.version], EDGE_OFF)
    assert (served.route, served.model_version, served.review_threshold) == ("model", own.version, own.review_threshold)


def test_the_cache_never_serves_another_generations_answer_as_its_own(default_model_dir):
    meta = ModelMetadata.load(default_model_dir)
    first, second, third = classify(default_model_dir, ["other-generation", meta.version, meta.version], CACHE_ONLY)
    assert first.model_version == "other-generation"
    assert (second.route, second.model_version) == ("model", meta.version)
    # A cached answer keeps its version's review threshold, not the default's.
    assert meta.review_threshold is not None
    assert (third.route, third.model_version, third.review_threshold) == ("cache", meta.version, meta.review_threshold)


def rebuilt(model_dir: Path):
    def rebuild():
        meta = ModelMetadata.load(model_dir)
        meta.version = "rebuilt"
        meta.save(model_dir)

    return rebuild


def test_a_directory_rebuilt_in_place_is_adopted(default_model_dir, tmp_path):
    model_dir = tmp_path / "model"
    derive(Path(default_model_dir), model_dir)
    [answer] = classify(str(model_dir), ["rebuilt"], EDGE_OFF, before=rebuilt(model_dir))
    assert (answer.route, answer.model_version) == ("model", "rebuilt")


def test_a_rebuilt_directory_is_adopted_after_another_generation_answered(default_model_dir, tmp_path):
    """An answer of a third version, read after the rebuild, must not stop the router from
    adopting the rebuilt one when that first answers (then its cache serves it)."""
    model_dir = tmp_path / "model"
    derive(Path(default_model_dir), model_dir)
    answers = classify(str(model_dir), ["other-generation", "rebuilt", "rebuilt"], CACHE_ONLY, rebuilt(model_dir))
    assert [(a.route, a.model_version) for a in answers] == [
        ("model", "other-generation"),
        ("model", "rebuilt"),
        ("cache", "rebuilt"),
    ]
