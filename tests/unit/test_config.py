import pytest

from deployments.config import AppConfig
from deployments.config_base import PROJECT_ROOT


def test_defaults_validate_and_paths_resolve_under_the_project():
    config = AppConfig.from_args({})
    assert config.model.engine.mode == "classify"
    assert config.model.engine.model_dir == str(PROJECT_ROOT / "artifacts/models/default")
    assert config.tokenizer.timeout_ms == 50 and config.tokenizer.max_tokens == 2048
    assert config.ingress.max_text_chars == 10_000


def test_default_data_paths_resolve_under_the_project_whatever_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = AppConfig.from_args({})
    assert config.edge.templates_file == str(PROJECT_ROOT / "config" / "templates.yaml")
    assert config.antispam.reference_texts_file == str(PROJECT_ROOT / "models" / "data" / "tickets.csv")
    given = AppConfig.from_args({"tokenizer": {"tokenizer_dir": "artifacts/x"}})
    assert given.tokenizer.tokenizer_dir == str(PROJECT_ROOT / "artifacts" / "x")


def test_absolute_model_dir_is_kept():
    config = AppConfig.from_args({"model": {"engine": {"model_dir": "/opt/m"}}})
    assert config.model.engine.model_dir == "/opt/m"


def test_serve_config_files_validate():
    """Our args, and Serve's own schema for the rest (deployment options, autoscaling
    policy import paths): what `serve deploy` would refuse fails here first."""
    import yaml
    from ray.serve.schema import ServeDeploySchema

    for name in ("serve_config.yaml", "serve_config.gpu.yaml"):
        doc = yaml.safe_load((PROJECT_ROOT / name).read_text())
        ServeDeploySchema.model_validate(doc)
        for app in doc["applications"]:
            AppConfig.from_args(app["args"])
            for deployment in app["deployments"]:
                policy = deployment.get("autoscaling_config", {}).get("policy")
                if policy:
                    module, attr = policy["policy_function"].split(":")
                    factory = getattr(__import__(module, fromlist=[attr]), attr)
                    factory(**policy.get("policy_kwargs", {}))


def test_unknown_key_is_named_with_the_allowed_ones():
    with pytest.raises(ValueError) as e:
        AppConfig.from_args({"tokenizer": {"timeout": 5}})
    msg = str(e.value)
    assert "tokenizer.timeout" in msg and "timeout_ms" in msg and "max_tokens" in msg


def test_bad_mode_names_value_and_choices():
    with pytest.raises(ValueError) as e:
        AppConfig.from_args({"model": {"engine": {"mode": "chat"}}})
    msg = str(e.value)
    assert "'chat'" in msg and "classify" in msg and "generate" in msg


@pytest.mark.parametrize(
    "args",
    [
        {"tokenizer": {"timeout_ms": 0}},
        {"ingress": {"max_text_chars": -1}},
        {"model": {"queue_per_slot": 0}},
        {"model": {"engine": {"gpu_memory_utilization": 1.5}}},
        {"nonsense": {}},
    ],
)
def test_out_of_range_values_are_refused(args):
    with pytest.raises(ValueError):
        AppConfig.from_args(args)


def test_every_field_has_a_description():
    from pydantic import BaseModel

    def walk(model):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                walk(field.annotation)

    walk(AppConfig)


def test_a_model_try_must_end_before_the_ticket_budget():
    with pytest.raises(ValueError, match=r"retry.per_try_timeout_ms=30000 must be below ingress.request_timeout_s=30"):
        AppConfig.from_args({"retry": {"per_try_timeout_ms": 30000}})
    assert AppConfig.from_args({"retry": {"per_try_timeout_ms": 29000}}).retry.timeout.then == "degraded"


def test_colocated_refuses_prefix_affinity_routing_and_names_the_topologies_that_have_it():
    generate = {"model": {"engine": {"mode": "generate"}}, "kv_cache": {"enabled": True}}
    with pytest.raises(ValueError, match=r"kv_cache.enabled=True needs topology 'chain' or 'fused', got 'colocated'"):
        AppConfig.from_args({**generate, "topology": "colocated"})
    assert AppConfig.from_args({**generate, "topology": "fused"}).kv_cache.enabled
    with pytest.raises(ValueError) as e:
        AppConfig.from_args({"topology": "merged"})
    assert "'merged'" in str(e.value) and "colocated" in str(e.value)
