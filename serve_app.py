"""Ray Serve application: `serve run serve_config.yaml` calls build_app(args)."""

from __future__ import annotations

from ray import serve
from ray.serve import Application

from deployments import (
    antispam,
    breaker,
    edge_router,
    ingress,
    model_replica,
    rate_limiter,
    tokenizer,
)
from deployments.config import AppConfig
from deployments.local import InProcessEdge

MODULES = (ingress, antispam, rate_limiter, edge_router, tokenizer, model_replica, breaker)
DEPLOYMENT_NAMES = tuple(m.DEFAULT_OPTIONS["name"] for m in MODULES)


def build_app(args: dict | None = None) -> Application:
    return bind_graph(AppConfig.from_args(args))


def bind_graph(config: AppConfig, options: dict[str, dict] | None = None) -> Application:
    """`options` overrides Serve options per deployment name, as serve_config.yaml's `deployments` does."""
    options = options or {}
    for single, holds in ((rate_limiter, "all users' buckets"), (breaker, "the breaker state all callers share")):
        name = single.DEFAULT_OPTIONS["name"]
        given = options.get(name, {})
        if given.get("num_replicas", 1) != 1 or "autoscaling_config" in given:
            raise ValueError(f"{name} holds {holds} and must run exactly 1 replica, got {given}")

    def deployment(cls, defaults: dict):
        return serve.deployment(cls, **{**defaults, **options.get(defaults["name"], {})})

    model_dir = config.model.engine.model_dir
    shared_breaker = deployment(breaker.Breaker, breaker.DEFAULT_OPTIONS).bind(config.breaker)
    model = deployment(model_replica.ModelReplica, model_replica.DEFAULT_OPTIONS).bind(config.model, shared_breaker)
    limiter = deployment(rate_limiter.RateLimiter, rate_limiter.DEFAULT_OPTIONS).bind(config.antispam)
    front = deployment(ingress.make_ingress(), ingress.DEFAULT_OPTIONS)
    if config.topology == "fused":
        stages = InProcessEdge(config.antispam, config.edge, config.tokenizer, config.breaker, config.retry, model_dir)
        return front.bind(config.ingress, None, {"rate_limiter": limiter, "model": model}, stages, shared_breaker)
    tok = deployment(tokenizer.Tokenizer, tokenizer.DEFAULT_OPTIONS).bind(config.tokenizer, model, model_dir)
    edge = deployment(edge_router.EdgeRouter, edge_router.DEFAULT_OPTIONS).bind(
        config.edge, tok, model, model_dir, shared_breaker, config.breaker, config.retry
    )
    spam = deployment(antispam.AntiSpam, antispam.DEFAULT_OPTIONS).bind(config.antispam, limiter, edge)
    nodes = {"antispam": spam, "rate_limiter": limiter, "edge_router": edge, "tokenizer": tok, "model": model}
    return front.bind(config.ingress, spam, nodes)
