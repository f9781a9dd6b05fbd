"""Ray Serve application: `serve run serve_config.yaml` calls build_app(args)."""

from __future__ import annotations

from dataclasses import replace

from ray.serve import Application

from deployments.config import AppConfig
from deployments.graph import GraphBuilder
from deployments.graph_nodes import GraphNodes


def build_app(args: dict | None = None) -> Application:
    return bind_graph(AppConfig.from_args(args))


def bind_graph(config: AppConfig, options: dict[str, dict] | None = None) -> Application:
    """`options` overrides Serve options per deployment name, as serve_config.yaml's `deployments` does."""
    build = GraphBuilder(config, options or {})
    shared_breaker = build.breaker()
    kv = build.kv_manager()
    model = build.model(shared_breaker, kv)
    side = build.canary_model()
    controller = build.canary_controller(model, side)
    nodes = GraphNodes(
        rate_limiter=build.rate_limiter(),
        model=model,
        kv_cache_manager=kv,
        review_queue=build.review_queue(),
        retrainer=build.retrainer(),
        canary_model=side,
        canary_controller=controller,
    )
    if config.topology in ("fused", "colocated"):
        return build.ingress(nodes=nodes, in_process=build.in_process_edge(), breaker=shared_breaker)
    tok = build.tokenizer(model)
    edge = build.edge_router(tokenizer=tok, model=model, breaker=shared_breaker, controller=controller, canary=side)
    spam = build.antispam(nodes.rate_limiter, edge)
    return build.ingress(nodes=replace(nodes, antispam=spam, edge_router=edge, tokenizer=tok))
