"""bench.loop's serve config (scripts/loop_serve.sh serves it): the shipped config with the
loop's overrides, valid for Serve's schema and the application's, with both model sides."""

from __future__ import annotations

import yaml
from ray.serve.schema import ServeDeploySchema

from bench.loop import LOOP_OVERRIDES, write_config
from deployments.config import AppConfig


def test_the_loop_config_serves_both_sides_with_the_loops_rollout(tmp_path):
    path = tmp_path / "loop.yaml"
    write_config(path, extra={"edge": {"templates_enabled": False}})
    config = yaml.safe_load(path.read_text())
    ServeDeploySchema.model_validate(config)
    [app] = config["applications"]
    parsed = AppConfig.from_args(app["args"])
    assert parsed.rollout.canary_model_dir.endswith(str(LOOP_OVERRIDES["rollout"]["canary_model_dir"]))
    assert parsed.rollout.policy.max_unproven_s == 180 and parsed.retrain.publish_to_canary
    assert not parsed.edge.templates_enabled
    sides = {d["name"]: d for d in app["deployments"] if d["name"].endswith("ModelReplica")}
    assert set(sides) == {"ModelReplica", "CanaryModelReplica"}
    assert all(side["ray_actor_options"]["num_cpus"] == 0.5 for side in sides.values())


def test_a_review_threshold_given_to_the_loop_flags_below_it(tmp_path):
    from bench.loop import main

    path = tmp_path / "loop.yaml"
    main(["--write-config", str(path), "--review-min-confidence", "0.7"])
    [app] = yaml.safe_load(path.read_text())["applications"]
    review = AppConfig.from_args(app["args"]).review
    assert review.min_confidence == 0.7 and review.audit_share == LOOP_OVERRIDES["review"]["audit_share"]
