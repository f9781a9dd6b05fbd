"""The application's settings: the `args` of serve_config.yaml, validated once in build_app."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import (
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from deployments.config_base import ProjectPath, Strict, resolve_project_path, validate_args
from deployments.engines import EngineConfig
from kv_partition.registry import RegistryConfig
from policies.admission import AdmissionConfig
from policies.batching import BatchSizeConfig
from policies.breaker import BreakerConfig
from policies.canary import CanaryConfig
from policies.label_drift import LabelDriftConfig
from policies.language import LanguageConfig
from policies.micro_batch import MicroBatchConfig
from policies.rate_limit import DuplicateConfig, RateLimitConfig
from policies.reclaim import ReclaimConfig
from policies.retry import RetryConfig
from policies.spam import SpamRulesConfig


class IngressConfig(Strict):
    max_text_chars: int = Field(10_000, gt=0, description="longest ticket text accepted, after normalization")
    max_batch_tickets: int = Field(64, gt=0, description="most tickets in one /v1/classify/batch call")
    request_timeout_s: float = Field(30.0, gt=0, description="end-to-end budget for one ticket")
    health_timeout_s: float = Field(5.0, gt=0, description="how long /healthz waits for each node")
    retry_after_s: int = Field(1, ge=0, description="Retry-After sent with 503 overloaded")
    admission: AdmissionConfig = Field(
        default_factory=AdmissionConfig,
        description="adaptive limit on tickets in flight per ingress replica; over it: 503 overloaded at once",
    )
    tier_header: str = Field(
        "x-user-tier",
        description="header naming the caller's rate-limit tier (see antispam.rate_limit.trust_tier_header)",
    )
    color_header: str = Field(
        "x-traffic-color",
        description="header sending a ticket to one model side (stable or canary), whatever the split",
    )
    label_drift: LabelDriftConfig = Field(
        default_factory=LabelDriftConfig,
        description="window of recent answers whose label mix is compared with the training mix",
    )


class AntiSpamConfig(Strict):
    rules: SpamRulesConfig = Field(default_factory=SpamRulesConfig, description="content rules")
    reference_texts_file: ProjectPath = Field(
        "models/data/tickets.csv",
        description="CSV of real tickets (column 'text') the random-string rule learns letter pairs from",
    )
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig, description="per-user token buckets")
    duplicates: DuplicateConfig = Field(default_factory=DuplicateConfig, description="same text, same user")
    limiter_timeout_ms: float = Field(
        250.0, gt=0, description="after this without the rate-limit actor's answer the ticket is admitted"
    )


# `edge` args with every edge answer off: each ticket goes to the model (the seeds' "before").
EDGE_OFF = {"templates_enabled": False, "cache_enabled": False, "pre_classifier_enabled": False}


# `args` with the control policies off: fixed batch knob and admission limit, no breaker,
# no retries, no fallback (Serve's bounded queues and the fixed limits remain).
POLICIES_OFF = {
    "ingress": {"admission": {"enabled": False}},
    "model": {"batching": {"enabled": False}, "reclaim": {"enabled": False}, "queue_per_slot": None},
    "breaker": {"enabled": False},
    "retry": {"enabled": False},
    "edge": {"degraded_enabled": False},
}


class EdgeConfig(Strict):
    language: LanguageConfig = Field(default_factory=LanguageConfig, description="language detection")
    templates_enabled: bool = Field(True, description="answer tickets matching a template (route template)")
    templates_file: ProjectPath = Field("config/templates.yaml", description="template rules (relative: project root)")
    cache_enabled: bool = Field(True, description="answer repeated tickets from model answers (route cache)")
    cache_max_entries: int = Field(100_000, gt=0, description="result cache size, least recently used evicted")
    cache_max_bytes: int = Field(
        64 * 1024**2, gt=0, description="result cache memory bound (texts kept as 16-byte digests), LRU evicted"
    )
    cache_ttl_s: float = Field(3600.0, gt=0, description="result cache entry lifetime")
    pre_classifier_enabled: bool = Field(True, description="answer confident simple tickets at the edge")
    pre_classifier_min_confidence: float | None = Field(
        None,
        gt=0,
        le=1,
        description="pre-classifier probability needed to answer (route edge_model); "
        "null: the model's gate per language, read off validation tickets at build time (else 0.8)",
    )
    pre_classifier_intents: list[str] | None = Field(
        None, description="intents the pre-classifier may answer; default: the model's 'simple' tier"
    )
    degraded_enabled: bool = Field(
        True,
        description="when the model path fails or the breaker is open, answer from the pre-classifier (route degraded)",
    )
    retry_after_s: int = Field(1, ge=0, description="Retry-After sent when the model path refuses a ticket (503)")


class TokenizerConfig(Strict):
    max_tokens: int = Field(2048, gt=0, description="tickets are truncated to this many tokens (or the model's limit)")
    timeout_ms: float = Field(50.0, gt=0, description="after this the raw text goes to the model replica instead")
    tokenizer_dir: ProjectPath | None = Field(
        None, description="tokenizer files to load; default the model's own (must hash the same)"
    )


class FaultConfig(Strict):
    """Off unless set: lets tests and drills make a replica fail on purpose."""

    failure: Literal["none", "unavailable", "out_of_memory", "slow"] = Field("none", description="what goes wrong")
    rate: float = Field(1.0, ge=0, le=1, description="share of engine calls it happens to")
    slow_ms: float = Field(3000.0, ge=0, description="failure slow: extra time per call")


class ModelReplicaConfig(Strict):
    engine: EngineConfig = Field(default_factory=EngineConfig, description="vLLM engine settings")
    batching: BatchSizeConfig = Field(
        default_factory=BatchSizeConfig, description="adaptive batch knob: most requests inside the engine at once"
    )
    queue_per_slot: float | None = Field(
        2.0,
        gt=0,
        description="requests waiting per batch slot beyond which new ones are throttled (429 row); null: unbounded",
    )
    reclaim: ReclaimConfig = Field(default_factory=ReclaimConfig, description="memory reclaim triggers")
    faults: FaultConfig = Field(default_factory=FaultConfig, description="failure injection (tests, drills)")

    @field_validator("engine")
    @classmethod
    def _resolve(cls, v: EngineConfig) -> EngineConfig:
        tenants = v.tenant_instructions_file
        return v.model_copy(
            update={
                "model_dir": resolve_project_path(v.model_dir),
                "tenant_instructions_file": resolve_project_path(tenants) if tenants else None,
            }
        )


class KVCacheConfig(Strict):
    enabled: bool = Field(
        False, description="run the KV-cache manager and route model calls by prompt prefix (generate mode only)"
    )
    affinity_routing: bool = Field(
        True,
        description="route model calls to the replica holding the tenant's prefix; false: Serve's default "
        "router (the manager still tracks prefixes, hit rates and warm-ups)",
    )
    registry: RegistryConfig = Field(
        default_factory=RegistryConfig, description="prefix registry: hot keys, TTL, imbalance, warm-up"
    )
    route_timeout_ms: float = Field(
        50.0, gt=0, description="after this without the manager's answer a request is routed by Serve's default"
    )
    hint_ttl_ms: float = Field(
        500.0, ge=0, description="how long a router reuses the manager's answer for a prefix before asking again"
    )
    manager_retry_s: float = Field(
        5.0, gt=0, description="after a failed manager query, routers use Serve's default router this long"
    )
    report_interval_ms: float = Field(
        500.0, gt=0, description="model replicas send what their prompts put in the cache this often, in one call"
    )
    warmup_timeout_s: float = Field(
        60.0, ge=0, description="most time a starting replica spends computing hot prefixes before taking traffic"
    )


class ReviewConfig(Strict):
    enabled: bool = Field(True, description="flag and record answers below min_confidence for a person to check")
    min_confidence: float | None = Field(
        None,
        ge=0,
        le=1,
        description="model and edge answers below this confidence get needs_review: true; "
        "null: the model's review_threshold (at most 5 % of right validation answers below it), else 0.5",
    )
    store_path: ProjectPath = Field(
        "var/review.sqlite3", description="SQLite file of the review queue (relative: project root); survives restarts"
    )
    record_timeout_ms: float = Field(
        1000.0, gt=0, description="after this without the review queue's answer the ticket is answered unrecorded"
    )
    retention_days: float = Field(
        90.0, gt=0, description="items recorded longer ago than this are deleted (at start, then hourly)"
    )
    audit_share: float = Field(
        0.01,
        ge=0,
        le=1,
        description="share of the answers not flagged that are recorded too, as audit items: how confident "
        "wrong answers are found (0: none)",
    )
    report_interval_s: float = Field(
        15.0, gt=0, description="how often the queue's gauges (open items, oldest age, audit estimate) are refreshed"
    )


class RetrainConfig(Strict):
    enabled: bool = Field(True, description="POST /admin/retrain builds a candidate from the resolved review items")
    candidates_dir: ProjectPath = Field(
        "artifacts/models/candidates",
        description="where candidates are built, one directory each (relative: project root; shared with the replicas)",
    )
    state_path: ProjectPath = Field(
        "var/retrain.json", description="the retrains' record (relative: project root); survives restarts"
    )
    epochs: int = Field(1, ge=1, description="passes over the training rows, warm-started from the serving model")
    reviewed_share: float = Field(
        0.2, gt=0, lt=1, description="share of resolved items never trained on: the candidate's reviewed set"
    )
    replay_rows: int = Field(
        0, ge=0, description="rows the serving model was built from, trained again beside the reviews; 0: all of them"
    )
    review_weight: int = Field(2, ge=1, description="times each resolved item counts in training")
    num_cpus: float = Field(1.0, gt=0, description="Ray CPUs the retrain task reserves (its own, not a replica's)")
    torch_threads: int = Field(1, ge=1, description="threads the retrain computes on: the rest stay the graph's")
    niceness: int = Field(10, ge=0, le=19, description="the retrain's CPU priority below the graph's (Unix nice)")
    publish_to_canary: bool = Field(
        False,
        description="a finished candidate becomes the canary: rollout.canary_model_dir (a link, models/registry.py) "
        "is pointed at it, and the canary controller starts its rollout",
    )


class RolloutConfig(Strict):
    canary_model_dir: ProjectPath | None = Field(
        None, description="model of the canary side, served next to model.engine.model_dir (stable); null: no canary"
    )
    shadow: bool = Field(
        False, description="the canary answers a copy of its share of tickets; stable answers are returned"
    )
    policy: CanaryConfig = Field(default_factory=CanaryConfig, description="split, judging thresholds and steps")
    judge_interval_s: float = Field(5.0, gt=0, description="how often the controller judges the canary")
    promote_to_stable: bool = Field(
        False,
        description="a complete rollout makes the canary's model stable by moving the aliases (model.engine.model_dir "
        "and canary_model_dir must be links, models/registry.py); false: an operator's edit",
    )
    golden_file: ProjectPath = Field(
        "models/data/golden.csv", description="golden set both sides answer before the canary is judged"
    )
    golden_tickets: int = Field(
        0, ge=0, description="golden tickets asked per comparison, spread evenly over the file; 0: all"
    )
    sync_interval_ms: float = Field(
        500.0, gt=0, description="callers fetch the split and send their answer counts this often, in one call"
    )
    call_timeout_ms: float = Field(
        1000.0, gt=0, description="after this without the controller's answer callers send every ticket to stable"
    )
    state_path: ProjectPath = Field(
        "var/canary.json", description="where the rollout's share, status and history survive a controller restart"
    )


class AdminConfig(Strict):
    token: SecretStr | None = Field(
        None, description="bearer token of the /admin API; prefer token_env (config files end up in logs and repos)"
    )
    token_env: str = Field(
        "TICKETSERVE_ADMIN_TOKEN", description="environment variable (of the ingress replicas) holding the token"
    )
    reviewer_token: SecretStr | None = Field(
        None,
        description="bearer token that may list and resolve review items and nothing else; prefer reviewer_token_env",
    )
    reviewer_token_env: str = Field(
        "TICKETSERVE_REVIEWER_TOKEN",
        description="environment variable (of the ingress replicas) holding the reviewer token",
    )

    def resolved_token(self) -> str | None:
        """The token from config, else from the environment; None: every admin call is 401."""
        return _secret(self.token, self.token_env)

    def resolved_reviewer_token(self) -> str | None:
        """The reviewer token from config, else from the environment; None: no reviewer role."""
        return _secret(self.reviewer_token, self.reviewer_token_env)


def _secret(value: SecretStr | None, env: str) -> str | None:
    if value is not None:
        return value.get_secret_value()
    return os.environ.get(env) or None


class AppConfig(Strict):
    topology: Literal["chain", "fused", "colocated"] = Field(
        "chain",
        description="chain: anti-spam filter, edge router and tokenizer are deployments of their own (scaled apart); "
        "fused: they run inside each ingress replica, two Serve hops fewer per ticket; "
        "colocated: fused, and the model's engine too (one replica per engine, no Serve hop on the model path)",
    )
    ingress: IngressConfig = Field(default_factory=IngressConfig, description="HTTP front door")
    antispam: AntiSpamConfig = Field(default_factory=AntiSpamConfig, description="anti-spam filter")
    edge: EdgeConfig = Field(default_factory=EdgeConfig, description="edge router")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="tokenizer deployment")
    model: ModelReplicaConfig = Field(default_factory=ModelReplicaConfig, description="model replica")
    breaker: BreakerConfig = Field(default_factory=BreakerConfig, description="circuit breaker of the model path")
    retry: RetryConfig = Field(default_factory=RetryConfig, description="retry matrix for model calls")
    micro_batch: MicroBatchConfig = Field(
        default_factory=MicroBatchConfig, description="several tickets to one model call once they pile up"
    )
    kv_cache: KVCacheConfig = Field(
        default_factory=KVCacheConfig, description="KV-cache manager and prefix-affinity routing of model calls"
    )
    review: ReviewConfig = Field(default_factory=ReviewConfig, description="review queue of low-confidence answers")
    retrain: RetrainConfig = Field(
        default_factory=RetrainConfig, description="candidates built from the resolved review items (a Ray task)"
    )
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig, description="blue-green model sides: canary split, judging, rollback"
    )
    admin: AdminConfig = Field(default_factory=AdminConfig, description="the /admin API")

    @model_validator(mode="after")
    def _model_call_fits_the_ticket_budget(self) -> AppConfig:
        if self.retry.per_try_timeout_ms >= self.ingress.request_timeout_s * 1000:
            raise ValueError(
                f"retry.per_try_timeout_ms={self.retry.per_try_timeout_ms:g} must be below "
                f"ingress.request_timeout_s={self.ingress.request_timeout_s:g} s, or a stuck model call "
                "ends as a 503 instead of a degraded answer"
            )
        return self

    @model_validator(mode="after")
    def _kv_cache_needs_generate(self) -> AppConfig:
        if self.kv_cache.enabled and self.model.engine.mode != "generate":
            raise ValueError(
                f"kv_cache.enabled=True needs model.engine.mode 'generate', got {self.model.engine.mode!r}: "
                "the classify runner keeps no KV cache between requests"
            )
        return self

    @model_validator(mode="after")
    def _colocated_has_no_model_deployment(self) -> AppConfig:
        if self.topology == "colocated" and self.kv_cache.enabled:
            raise ValueError(
                "kv_cache.enabled=True needs topology 'chain' or 'fused', got 'colocated': prefix-affinity "
                "routing picks a model replica, and colocated has none apart from the ingress"
            )
        return self

    @classmethod
    def from_args(cls, args: dict | None) -> AppConfig:
        """Validates serve_config.yaml `args`; the error names each bad key and value."""
        return validate_args(cls, args)
