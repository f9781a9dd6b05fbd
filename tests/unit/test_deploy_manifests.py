"""The shipped Serve configs and the KubeRay manifest: valid for Serve's own schema and for
the application's config, each listing the deployments its app binds; the RayService
serves what serve_config.gpu.yaml does, on the image the Dockerfile builds."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from ray.serve import Application
from ray.serve.schema import ServeDeploySchema

from deployments.config import AppConfig
from serve_app import bind_graph

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
    from deployments.http import ingress

    app = yaml.safe_load((ROOT / name).read_text())["applications"][0]
    given = next((d for d in app["deployments"] if d["name"] == "Ingress"), {})
    grace_s = given.get("graceful_shutdown_timeout_s", ingress.DEFAULT_OPTIONS["graceful_shutdown_timeout_s"])
    assert grace_s > AppConfig.from_args(app["args"]).ingress.request_timeout_s


def test_the_graph_refuses_an_ingress_grace_shorter_than_a_ticket():
    from serve_app import bind_graph

    config = AppConfig.from_args({"ingress": {"request_timeout_s": 30}})
    with pytest.raises(ValueError, match="graceful_shutdown_timeout_s=20 must exceed ingress.request_timeout_s=30"):
        bind_graph(config, {"Ingress": {"graceful_shutdown_timeout_s": 20}})


def bound_deployments(app: Application) -> set[str]:
    """Names of every deployment `app` binds, its ingress and all it holds handles to."""
    names: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, Application):
            deployment = value._bound_deployment
            names.add(deployment.name)
            for arg in (*deployment.init_args, *deployment.init_kwargs.values()):
                walk(arg)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)
        elif dataclasses.is_dataclass(value):  # GraphNodes
            for field in dataclasses.fields(value):
                walk(getattr(value, field.name))

    walk(app)
    return names


@pytest.mark.parametrize("name", ["serve_config.yaml", "serve_config.gpu.yaml", "deploy/rayservice.yaml"])
def test_each_config_lists_the_deployments_its_app_binds_and_no_other(name):
    config = (
        rayservice_serve_config() if name.endswith("rayservice.yaml") else yaml.safe_load((ROOT / name).read_text())
    )
    [app] = config["applications"]
    listed = {d["name"] for d in app["deployments"]}
    bound = bound_deployments(bind_graph(AppConfig.from_args(app["args"])))
    # The retrainer takes its defaults (0 CPUs, one replica): a config may leave it out.
    assert listed <= bound and bound - listed <= {"Retrainer"}, (sorted(listed), sorted(bound))


def test_the_rayservice_runs_the_image_the_dockerfile_builds_on_rays_own_base():
    manifest = yaml.safe_load((ROOT / "deploy" / "rayservice.yaml").read_text())
    cluster = manifest["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    images = {c["image"] for pod in pods for c in pod["template"]["spec"]["containers"]}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert len(images) == 1 and f"-t {images.pop()} ." in dockerfile
    # Ray's base image of the Ray the manifest and pyproject.toml pin, and a Python the project supports.
    ray_version = cluster["rayVersion"]
    assert f'"ray[serve]=={ray_version}"' in (ROOT / "pyproject.toml").read_text()
    bases = re.findall(r"rayproject/ray:(\S+)", dockerfile)
    assert bases and all(re.fullmatch(rf"{re.escape(ray_version)}-py31[1-3]-(gpu|cpu)", b) for b in bases), bases
    assert "ARG RAY_IMAGE=rayproject/ray:" in dockerfile and "FROM ${RAY_IMAGE}" in dockerfile
    # The image sets the environment the RayService gives its pods.
    env = {e["name"]: e["value"] for e in pods[0]["template"]["spec"]["containers"][0]["env"]}
    for variable, value in env.items():
        assert re.search(rf"{variable}={re.escape(value)}\b", dockerfile), variable


@pytest.mark.parametrize("topology", ["chain", "fused", "colocated"])
def test_each_topology_binds_its_own_deployments(topology):
    full = {"review": {"enabled": True}, "retrain": {"enabled": True}, "rollout": {"canary_model_dir": "/m/canary"}}
    bound = bound_deployments(bind_graph(AppConfig.from_args({"topology": topology, **full})))
    shared = {"Ingress", "RateLimiter", "Breaker", "ReviewQueue", "Retrainer", "CanaryController", "CanaryModelReplica"}
    edge = {"AntiSpam", "EdgeRouter", "Tokenizer"}
    expected = {
        "chain": shared | edge | {"ModelReplica"},
        "fused": shared | {"ModelReplica"},
        "colocated": shared,
    }[topology]
    assert bound - {"KVCacheManager"} == expected


@pytest.mark.parametrize("single", ["RateLimiter", "Breaker", "ReviewQueue", "CanaryController", "KVCacheManager"])
def test_the_graph_refuses_a_second_replica_of_a_node_that_holds_shared_state(single):
    with pytest.raises(ValueError, match=rf"{single} holds .* must run exactly 1 replica"):
        bind_graph(AppConfig.from_args({}), {single: {"num_replicas": 2}})
