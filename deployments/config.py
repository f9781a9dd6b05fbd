"""The application's settings: the `args` of serve_config.yaml, validated once in build_app."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from deployments.config_base import ProjectPath, Strict, resolve_project_path, validate_args
from deployments.config_loop import AdminConfig, RetrainConfig, ReviewConfig, RolloutConfig
from deployments.engines import EngineConfig
from kv_partition.registry import RegistryConfig
from policies.admission import AdmissionConfig
from policies.batching import BatchSizeConfig
from policies.breaker import BreakerConfig
from policies.deferral import DeferralConfig
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
    background: DeferralConfig = Field(
        default_factory=DeferralConfig,
        description="background tickets refused for capacity: how long and how they are held for another try",
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
