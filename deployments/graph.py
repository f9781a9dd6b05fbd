"""One builder per Serve node of the graph; serve_app.bind_graph wires them. The edge
stages (anti-spam, edge router, tokenizer) take the same arguments in every topology
(InProcessEdge's): chain binds them as deployments, fused and colocated build them in the
ingress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ray import serve
from ray.serve import Application

from deployments.callers import prefix_router
from deployments.config import AppConfig, KVCacheConfig
from deployments.http import http_app, ingress
from deployments.nodes import (
    antispam,
    breaker,
    canary,
    edge_router,
    kv_manager,
    model_replica,
    rate_limiter,
    retrainer,
    review,
    tokenizer,
)
from deployments.nodes.in_process import InProcessEdge

MODULES = (ingress, antispam, rate_limiter, edge_router, tokenizer, model_replica, breaker, kv_manager, review, canary)
# The canary side is a second deployment of ModelReplica under its own name.
CANARY_MODEL = "CanaryModelReplica"
DEPLOYMENT_NAMES: tuple[str, ...] = (*(str(m.DEFAULT_OPTIONS["name"]) for m in MODULES), CANARY_MODEL)
# Deployments that hold state every caller shares: more than one replica would split it.
SINGLES = (
    (rate_limiter, "all users' buckets"),
    (breaker, "the breaker state all callers share"),
    (kv_manager, "the registry of every replica's prefixes"),
    (review, "the review queue's SQLite file (one writer)"),
    (canary, "the rollout's split and judge"),
)


def prefix_router_config(config: KVCacheConfig) -> dict:
    """The model replica's `request_router_config` deployment option."""
    return {
        "request_router_class": f"{prefix_router.__name__}:{prefix_router.PrefixAffinityRouter.__name__}",
        "request_router_kwargs": {
            "manager_deployment": kv_manager.DEFAULT_OPTIONS["name"],
            "route_timeout_ms": config.route_timeout_ms,
            "hint_ttl_ms": config.hint_ttl_ms,
            "manager_retry_s": config.manager_retry_s,
            "max_imbalance_requests": config.registry.max_imbalance_requests,
        },
    }


@dataclass(frozen=True)
class GraphBuilder:
    """`options` overrides Serve options per deployment name, as serve_config.yaml's
    `deployments` does; they are checked against what the graph needs on construction."""

    config: AppConfig
    options: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for single, holds in SINGLES:
            name = single.DEFAULT_OPTIONS["name"]
            given = self.options.get(name, {})
            if given.get("num_replicas", 1) != 1 or "autoscaling_config" in given:
                raise ValueError(f"{name} holds {holds} and must run exactly 1 replica, got {given}")
        name = ingress.DEFAULT_OPTIONS["name"]
        grace_s = {**ingress.DEFAULT_OPTIONS, **self.options.get(name, {})}["graceful_shutdown_timeout_s"]
        if float(grace_s) <= self.config.ingress.request_timeout_s:
            raise ValueError(
                f"{name} graceful_shutdown_timeout_s={grace_s} must exceed ingress.request_timeout_s="
                f"{self.config.ingress.request_timeout_s}: a replaced ingress would be killed holding tickets"
            )

    @property
    def colocated(self) -> bool:
        return self.config.topology == "colocated"

    @property
    def model_dir(self) -> str:
        return self.config.model.engine.model_dir

    def _deployment(self, cls: type, defaults: dict[str, Any]):
        return serve.deployment(cls, **{**defaults, **self.options.get(defaults["name"], {})})

    def breaker(self) -> Application:
        return self._deployment(breaker.Breaker, breaker.DEFAULT_OPTIONS).bind(config=self.config.breaker)

    def kv_manager(self) -> Application | None:
        if not self.config.kv_cache.enabled:
            return None
        return self._deployment(kv_manager.KVCacheManager, kv_manager.DEFAULT_OPTIONS).bind(config=self.config.kv_cache)

    def model(self, shared_breaker: Application, kv: Application | None) -> Application | None:
        """None in topology colocated: each ingress replica holds its own engine."""
        if self.colocated:
            return None
        options = model_replica.DEFAULT_OPTIONS
        if kv is not None and self.config.kv_cache.affinity_routing:
            options = {**options, "request_router_config": prefix_router_config(self.config.kv_cache)}
        return self._deployment(model_replica.ModelReplica, options).bind(
            config=self.config.model, breaker=shared_breaker, kv_manager=kv, kv_cache=self.config.kv_cache
        )

    def review_queue(self) -> Application | None:
        if not self.config.review.enabled:
            return None
        return self._deployment(review.ReviewQueue, review.DEFAULT_OPTIONS).bind(config=self.config.review)

    def retrainer(self) -> Application | None:
        cfg = self.config
        if not (cfg.review.enabled and cfg.retrain.enabled):
            return None
        publish = cfg.rollout.canary_model_dir if cfg.retrain.publish_to_canary else None
        return self._deployment(retrainer.Retrainer, retrainer.DEFAULT_OPTIONS).bind(
            config=cfg.retrain, store_path=cfg.review.store_path, model_dir=self.model_dir, canary_link=publish
        )

    def canary_model(self) -> Application | None:
        """Same replica class and settings, the canary's model; Serve's default router, no KV manager."""
        model = self.config.model
        if self.config.rollout.canary_model_dir is None:
            return None
        engine = model.engine.model_copy(update={"model_dir": self.config.rollout.canary_model_dir})
        options = {**model_replica.DEFAULT_OPTIONS, "name": CANARY_MODEL}
        return self._deployment(model_replica.ModelReplica, options).bind(
            config=model.model_copy(update={"engine": engine})
        )

    def canary_controller(self, model: Application | None, side: Application | None) -> Application:
        # Colocated: the stable side is the ingress, which holds the engines.
        stable = ingress.DEFAULT_OPTIONS["name"] if self.colocated else model
        return self._deployment(canary.CanaryController, canary.DEFAULT_OPTIONS).bind(
            config=self.config.rollout, stable=stable, canary=side, stable_model_dir=self.model_dir
        )

    def rate_limiter(self) -> Application:
        return self._deployment(rate_limiter.RateLimiter, rate_limiter.DEFAULT_OPTIONS).bind(
            config=self.config.antispam
        )

    def tokenizer(self, model: Application | None) -> Application:
        args = self.in_process_edge().tokenizer_args(model)
        return self._deployment(tokenizer.Tokenizer, tokenizer.DEFAULT_OPTIONS).bind(**args)

    def edge_router(self, **nodes: Application | None) -> Application:
        """`nodes`: tokenizer, model, breaker, controller and canary."""
        args = self.in_process_edge().edge_router_args(**nodes)
        return self._deployment(edge_router.EdgeRouter, edge_router.DEFAULT_OPTIONS).bind(**args)

    def antispam(self, limiter: Application, next_node: Application) -> Application:
        args = self.in_process_edge().antispam_args(limiter, next_node)
        return self._deployment(antispam.AntiSpam, antispam.DEFAULT_OPTIONS).bind(**args)

    def in_process_edge(self) -> InProcessEdge:
        """The edge stages' settings: built by the ingress in topologies fused and colocated
        (colocated: the model too), bound as deployments in chain from the same arguments."""
        cfg = self.config
        return InProcessEdge(
            antispam=cfg.antispam,
            edge=cfg.edge,
            tokenizer=cfg.tokenizer,
            breaker=cfg.breaker,
            retry=cfg.retry,
            micro_batch=cfg.micro_batch,
            model_dir=self.model_dir,
            rollout=cfg.rollout,
            model=cfg.model if self.colocated else None,
        )

    def ingress(self, **kwargs: Any) -> Application:
        """`kwargs`: the nodes and, fused or colocated, the in-process stages and the breaker."""
        options = ingress.DEFAULT_OPTIONS
        if self.colocated:
            # Each ingress replica holds an engine: the model replica's reservation and health checks.
            engine_options = ("ray_actor_options", "health_check_period_s", "health_check_timeout_s")
            options = {**options, **{k: model_replica.DEFAULT_OPTIONS[k] for k in engine_options}}
        front = self._deployment(http_app.make_ingress(ingress.Ingress, self.config.admin), options)
        return front.bind(config=self.config.ingress, model_dir=self.model_dir, review=self.config.review, **kwargs)
