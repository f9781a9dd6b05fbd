"""Ray Serve application: `serve run serve_config.yaml` calls build_app(args)."""

from __future__ import annotations

from ray import serve
from ray.serve import Application

from deployments import ingress, model_replica, tokenizer
from deployments.config import AppConfig


def build_app(args: dict | None = None) -> Application:
    config = AppConfig.from_args(args)
    model = serve.deployment(model_replica.ModelReplica, **model_replica.DEFAULT_OPTIONS).bind(config.model)
    tok = serve.deployment(tokenizer.Tokenizer, **tokenizer.DEFAULT_OPTIONS).bind(
        config.tokenizer, model, config.model.engine.model_dir
    )
    return serve.deployment(ingress.make_ingress(), **ingress.DEFAULT_OPTIONS).bind(config.ingress, tok, model)
