"""The shipped Serve configs and the KubeRay manifest: valid for Serve's own schema and for
the application's config, and the RayService serves what serve_config.gpu.yaml does."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from deployments.config import AppConfig

ROOT = Path(__file__).resolve().parents[2]
# By topology: `fused` runs anti-spam, edge and tokenizer inside the ingress replica.
GRAPH_DEPLOYMENTS = {
    "chain": {"Ingress", "AntiSpam", "RateLimiter", "EdgeRouter", "Tokenizer", "ModelReplica", "Breaker"},
    "fused": {"Ingress", "RateLimiter", "ModelReplica", "Breaker"},
}


def rayservice_serve_config() -> dict:
    manifest = yaml.safe_load((ROOT / "deploy" / "rayservice.yaml").read_text())
    assert manifest["kind"] == "RayService"
    return yaml.safe_load(manifest["spec"]["serveConfigV2"])


@pytest.mark.parametrize("name", ["serve_config.yaml", "serve_config.gpu.yaml", "deploy/rayservice.yaml"])
def test_serve_configs_pass_serves_schema_and_the_apps_own(name):
    config = (
        rayservice_serve_config() if name.endswith("rayservice.yaml") else yaml.safe_load((ROOT / name).read_text())
    )
    schema = ServeDeploySchema.model_validate(config)
    (app,) = schema.applications
    assert app.import_path == "serve_app:build_app"
    topology = AppConfig.from_args(app.args).topology
    assert GRAPH_DEPLOYMENTS[topology] <= {d["name"] for d in config["applications"][0]["deployments"]}


def test_the_rayservice_serves_the_gpu_config():
    gpu = yaml.safe_load((ROOT / "serve_config.gpu.yaml").read_text())
    assert rayservice_serve_config() == gpu
    names = {d["name"] for d in gpu["applications"][0]["deployments"]}
    assert {"ReviewQueue", "CanaryController", "KVCacheManager"} <= names


@pytest.mark.parametrize("name", ["serve_config.yaml", "serve_config.gpu.yaml"])
def test_a_replaced_ingress_outlives_every_ticket_it_holds(name):
    """`serve deploy` of a changed config stops the old ingress; it must answer the tickets it
    holds (each ends within ingress.request_timeout_s) before Serve kills it."""
    from deployments import ingress

    app = yaml.safe_load((ROOT / name).read_text())["applications"][0]
    given = next((d for d in app["deployments"] if d["name"] == "Ingress"), {})
    grace_s = given.get("graceful_shutdown_timeout_s", ingress.DEFAULT_OPTIONS["graceful_shutdown_timeout_s"])
    assert grace_s > AppConfig.from_args(app["args"]).ingress.request_timeout_s


def test_the_graph_refuses_an_ingress_grace_shorter_than_a_ticket():
    from serve_app import bind_graph

    config = AppConfig.from_args({"ingress": {"request_timeout_s": 30}})
    with pytest.raises(ValueError, match="graceful_shutdown_timeout_s=20 must exceed ingress.request_timeout_s=30"):
        bind_graph(config, {"Ingress": {"graceful_shutdown_timeout_s": 20}})
