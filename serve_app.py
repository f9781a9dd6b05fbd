"""Ray Serve application: `serve run serve_config.yaml` calls build_app(args)."""

from __future__ import annotations

from dataclasses import replace

from ray import serve
from ray.serve import Application

from deployments import (
    antispam,
    breaker,
    canary,
    edge_router,
    http_app,
    ingress,
    kv_manager,
    model_replica,
    prefix_router,
    rate_limiter,
    retrainer,
    review,
    tokenizer,
)
from deployments.config import AppConfig
from deployments.graph_nodes import GraphNodes
from deployments.in_process import InProcessEdge

MODULES = (ingress, antispam, rate_limiter, edge_router, tokenizer, model_replica, breaker, kv_manager, review, canary)
# The canary side is a second deployment of ModelReplica under its own name.
CANARY_MODEL = "CanaryModelReplica"
DEPLOYMENT_NAMES = (*(m.DEFAULT_OPTIONS["name"] for m in MODULES), CANARY_MODEL)


def build_app(args: dict | None = None) -> Application:
    return bind_graph(AppConfig.from_args(args))


def bind_graph(config: AppConfig, options: dict[str, dict] | None = None) -> Application:
    """`options` overrides Serve options per deployment name, as serve_config.yaml's `deployments` does."""
    options = options or {}
    singles = (
        (rate_limiter, "all users' buckets"),
        (breaker, "the breaker state all callers share"),
        (kv_manager, "the registry of every replica's prefixes"),
        (review, "the review queue's SQLite file (one writer)"),
        (canary, "the rollout's split and judge"),
    )
    for single, holds in singles:
        name = single.DEFAULT_OPTIONS["name"]
        given = options.get(name, {})
        if given.get("num_replicas", 1) != 1 or "autoscaling_config" in given:
            raise ValueError(f"{name} holds {holds} and must run exactly 1 replica, got {given}")

    front_name = ingress.DEFAULT_OPTIONS["name"]
    grace_s = {**ingress.DEFAULT_OPTIONS, **options.get(front_name, {})}["graceful_shutdown_timeout_s"]
    if grace_s <= config.ingress.request_timeout_s:
        raise ValueError(
            f"{front_name} graceful_shutdown_timeout_s={grace_s} must exceed ingress.request_timeout_s="
            f"{config.ingress.request_timeout_s}: a replaced ingress would be killed holding tickets"
        )

    def deployment(cls, defaults: dict):
        return serve.deployment(cls, **{**defaults, **options.get(defaults["name"], {})})

    model_dir = config.model.engine.model_dir
    shared_breaker = deployment(breaker.Breaker, breaker.DEFAULT_OPTIONS).bind(config=config.breaker)
    model_options, kv = model_replica.DEFAULT_OPTIONS, None
    if config.kv_cache.enabled:
        kv = deployment(kv_manager.KVCacheManager, kv_manager.DEFAULT_OPTIONS).bind(config=config.kv_cache)
        if config.kv_cache.affinity_routing:
            model_options = {**model_options, "request_router_config": prefix_router.router_config(config.kv_cache)}
    colocated = config.topology == "colocated"
    model = (
        None
        if colocated
        else deployment(model_replica.ModelReplica, model_options).bind(
            config=config.model, breaker=shared_breaker, kv_manager=kv, kv_cache=config.kv_cache
        )
    )
    queue = retrain = None
    if config.review.enabled:
        queue = deployment(review.ReviewQueue, review.DEFAULT_OPTIONS).bind(config=config.review)
        if config.retrain.enabled:
            publish = config.rollout.canary_model_dir if config.retrain.publish_to_canary else None
            retrain = deployment(retrainer.Retrainer, retrainer.DEFAULT_OPTIONS).bind(
                config=config.retrain, store_path=config.review.store_path, model_dir=model_dir, canary_link=publish
            )
    side = None
    if config.rollout.canary_model_dir is not None:
        # Same replica class and settings, the canary's model; Serve's default router, no KV manager.
        engine = config.model.engine.model_copy(update={"model_dir": config.rollout.canary_model_dir})
        side = deployment(model_replica.ModelReplica, {**model_replica.DEFAULT_OPTIONS, "name": CANARY_MODEL}).bind(
            config=config.model.model_copy(update={"engine": engine})
        )
    controller = deployment(canary.CanaryController, canary.DEFAULT_OPTIONS).bind(
        config=config.rollout, stable=front_name if colocated else model, canary=side, stable_model_dir=model_dir
    )
    limiter = deployment(rate_limiter.RateLimiter, rate_limiter.DEFAULT_OPTIONS).bind(config=config.antispam)
    nodes = GraphNodes(
        rate_limiter=limiter,
        model=model,
        kv_cache_manager=kv,
        review_queue=queue,
        retrainer=retrain,
        canary_model=side,
        canary_controller=controller,
    )
    front_options = ingress.DEFAULT_OPTIONS
    if colocated:
        # Each ingress replica holds an engine: the model replica's reservation and health checks.
        engine_options = ("ray_actor_options", "health_check_period_s", "health_check_timeout_s")
        front_options = {**front_options, **{k: model_replica.DEFAULT_OPTIONS[k] for k in engine_options}}
    front = deployment(http_app.make_ingress(ingress.Ingress, config.admin), front_options)
    if config.topology in ("fused", "colocated"):
        stages = InProcessEdge(
            antispam=config.antispam,
            edge=config.edge,
            tokenizer=config.tokenizer,
            breaker=config.breaker,
            retry=config.retry,
            micro_batch=config.micro_batch,
            model_dir=model_dir,
            rollout=config.rollout,
            model=config.model if colocated else None,
        )
        return front.bind(
            config=config.ingress,
            nodes=nodes,
            model_dir=model_dir,
            in_process=stages,
            breaker=shared_breaker,
            review=config.review,
        )
    tok = deployment(tokenizer.Tokenizer, tokenizer.DEFAULT_OPTIONS).bind(
        config=config.tokenizer, model=model, model_dir=model_dir
    )
    edge = deployment(edge_router.EdgeRouter, edge_router.DEFAULT_OPTIONS).bind(
        config=config.edge,
        tokenizer=tok,
        model=model,
        model_dir=model_dir,
        breaker=shared_breaker,
        breaker_config=config.breaker,
        retry=config.retry,
        micro_batch=config.micro_batch,
        controller=controller,
        canary=side,
        rollout=config.rollout,
    )
    spam = deployment(antispam.AntiSpam, antispam.DEFAULT_OPTIONS).bind(
        config=config.antispam, limiter=limiter, next_node=edge
    )
    chain = replace(nodes, antispam=spam, edge_router=edge, tokenizer=tok)
    return front.bind(config=config.ingress, nodes=chain, model_dir=model_dir, review=config.review)
