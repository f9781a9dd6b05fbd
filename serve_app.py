"""Ray Serve application: `serve run serve_config.yaml` calls build_app(args)."""

from __future__ import annotations

from ray import serve
from ray.serve import Application

from deployments import ingress, model_replica, tokenizer
from deployments.config import AppConfig


def build_app(args: dict | None = None) -> Application:
    return bind_graph(AppConfig.from_args(args))


def bind_graph(config: AppConfig, options: dict[str, dict] | None = None) -> Application:
    """`options` overrides Serve options per deployment name, as serve_config.yaml's `deployments` does."""
    options = options or {}

    def deployment(cls, defaults: dict):
        return serve.deployment(cls, **{**defaults, **options.get(defaults["name"], {})})

    model = deployment(model_replica.ModelReplica, model_replica.DEFAULT_OPTIONS).bind(config.model)
    tok = deployment(tokenizer.Tokenizer, tokenizer.DEFAULT_OPTIONS).bind(
        config.tokenizer, model, config.model.engine.model_dir
    )
    return deployment(ingress.make_ingress(), ingress.DEFAULT_OPTIONS).bind(config.ingress, tok, model)
