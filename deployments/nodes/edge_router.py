"""Edge router: language check, result cache, templates and the pre-classifier answer
what they can; the rest goes on to the tokenizer and the model replica."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.api import Answer, Refusal, Route, Ticket
from deployments.callers.breaker_view import BreakerView
from deployments.callers.canary_view import CanaryView
from deployments.callers.model_path import GiveUp, ModelPath
from deployments.config import EdgeConfig
from deployments.config_loop import RolloutConfig
from deployments.metrics.held_gauge import HeldGauge
from deployments.nodes.result_cache import cache_key, result_cache
from models.artifacts import ModelMetadata, metadata_mtime_ns
from models.edge_classifier import EdgeClassifier
from models.ranking import RunnersUp
from policies.breaker import BreakerConfig
from policies.edge_route import edge_answer, edge_gates, fallback_answer
from policies.language import Identify, detect_language
from policies.micro_batch import MicroBatchConfig
from policies.retry import RetryConfig
from policies.templates import TemplateSet

logger = logging.getLogger("ray.serve")

# Models built without a validation split (an instruct LLM for generate mode) carry no gates.
DEFAULT_EDGE_GATE = 0.8

DEFAULT_OPTIONS = {
    "name": "EdgeRouter",
    "max_ongoing_requests": 1024,
    # Past this the caller gets BackPressureError, which the ingress answers as 503
    # overloaded with Retry-After: a bounded queue instead of a growing one.
    "max_queued_requests": 2048,
    "ray_actor_options": {"num_cpus": 0},
    "max_surge_percent": 100,  # an upgrade starts the new replicas before the old ones stop
}


def py3langid_identifier() -> Identify:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

    def identify(text: str) -> tuple[str, float]:
        language, probability = identifier.classify(text)
        return language, float(probability)

    return identify


class EdgeRouter:
    async def __init__(
        self,
        config: EdgeConfig,
        tokenizer: DeploymentHandle,
        model: DeploymentHandle,
        model_dir: str,
        breaker: DeploymentHandle,
        breaker_config: BreakerConfig,
        retry: RetryConfig,
        controller: DeploymentHandle | None = None,
        canary: DeploymentHandle | None = None,
        rollout: RolloutConfig | None = None,
        micro_batch: MicroBatchConfig | None = None,
        identify_factory: Callable[[], Identify] = py3langid_identifier,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`controller` owns the rollout and the result caches' epoch; `canary` is the
        second model side it splits tickets to."""
        self._config = config
        self._clock = clock
        view = (
            BreakerView(breaker, breaker_config.sync_interval_ms / 1000, breaker_config.call_timeout_ms / 1000, clock)
            if breaker_config.enabled
            else None
        )
        rollout = rollout or RolloutConfig()
        split = None
        if controller is not None:
            split = CanaryView(controller, rollout.sync_interval_ms / 1000, rollout.call_timeout_ms / 1000)
            await split.start()
        same_tokens = canary is None or (
            (await canary.tokenizer_info.remote()).tokenizer_hash
            == (await model.tokenizer_info.remote()).tokenizer_hash
        )
        self._model_path = ModelPath(
            tokenizer,
            model,
            view,
            retry,
            clock,
            canary=canary,
            split=split,
            canary_takes_tokens=same_tokens,
            micro_batch=micro_batch,
        )
        self._epoch = 0
        self._identify = identify_factory()
        self._model_dir = model_dir
        # The model this router was deployed with, read from its directory, not from whichever
        # replica answers first: during a rolling upgrade that may be the old version's.
        meta = ModelMetadata.load(model_dir)
        labels = meta.label_tiers()
        self._templates = TemplateSet.from_yaml(config.templates_file) if config.templates_enabled else None
        unknown = sorted(set(self._templates.intents if self._templates else ()) - set(labels))
        unknown += sorted(set(config.pre_classifier_intents or ()) - set(labels))
        if unknown:
            raise RuntimeError(
                f"edge router: intents {unknown} are not labels of model {meta.version}; labels are {sorted(labels)}"
            )
        self._edge_intents = set(
            config.pre_classifier_intents
            if config.pre_classifier_intents is not None
            else [name for name, tier in labels.items() if tier == "simple"]
        )
        self._model_version = meta.version
        # Each answer goes out with the review threshold of the model version it names (the
        # other generation's during a rolling upgrade, a canary's), as its replica reported it.
        self._thresholds: dict[str, float | None] = {meta.version: meta.review_threshold}
        self._dir_version: str | None = meta.version
        self._metadata_mtime_ns = metadata_mtime_ns(model_dir)
        # The build read a gate per language off calibration tickets, where the edge's
        # answers were at least as accurate as the model's; a configured value overrides it.
        self._edge_gates = (
            {"*": config.pre_classifier_min_confidence}
            if config.pre_classifier_min_confidence is not None
            else edge_gates({"*": DEFAULT_EDGE_GATE, **(meta.edge_min_confidence or {})}, meta.review_threshold)
        )
        self._pre_classifier = self._load_pre_classifier() if config.pre_classifier_enabled else None
        self._cache = result_cache(config)
        self._routes = Counter(
            "edge_routes_total",
            description="Tickets leaving the edge router, by route (template, cache, edge_model, model, degraded) or refusal.",
            tag_keys=("route",),
        )
        self._cache_size = HeldGauge("edge_cache_entries", description="Entries in this replica's result cache.")

    def _load_pre_classifier(self) -> EdgeClassifier | None:
        try:
            classifier = EdgeClassifier.load(self._model_dir)
        except FileNotFoundError as e:
            # Models built elsewhere (an instruct LLM for generate mode) come without one.
            logger.warning("no edge pre-classifier, route edge_model is off: %s", e)
            return None
        if classifier.model_version != self._model_version:
            raise RuntimeError(
                f"edge classifier in {self._model_dir} belongs to {classifier.model_version}, "
                f"the model replica serves {self._model_version}; rebuild with `python -m models.build`"
            )
        return classifier

    async def classify(self, ticket: Ticket) -> Answer | Refusal:
        c = self._config
        lang = detect_language(ticket.text, ticket.lang_hint, c.language, self._identify)
        if not lang.supported:
            self._routes.inc(tags={"route": "unsupported_language"})
            return Refusal(
                422,
                "unsupported_language",
                f"the ticket reads as {lang.language!r}; served languages are {', '.join(c.language.supported)}",
            )
        split = self._model_path.split
        if split is not None and split.epoch != self._epoch:
            self._epoch = split.epoch
            self._cache.clear()
        side, shadow = self._model_path.route(ticket.ticket_id or ticket.request_id, ticket.color)
        canary_version = split.canary_version if split is not None else None
        version = canary_version if side == "canary" and canary_version else self._model_version
        hit = self._cache.get(cache_key(ticket, version), self._clock()) if c.cache_enabled else None
        guess = template = None
        if hit is None:
            guess = self._pre_classifier.predict(ticket.text) if self._pre_classifier is not None else None
            template = self._templates.match(ticket.text, lang.language) if self._templates else None
        gate = self._edge_gates.get(lang.language, self._edge_gates["*"])
        if edge := edge_answer(hit, template, guess, side, self._edge_intents, gate):
            version = version if edge.route == "cache" else None
            others = guess.runners_up if edge.route == "edge_model" and guess is not None else ()
            return self._answer(
                edge.label, edge.confidence, edge.route, lang.language, edge.answer_id, False, version, others
            )
        result = await self._model_path.classify(ticket.text, ticket.request_id, ticket.tenant, side, shadow)
        if isinstance(result, GiveUp):
            return self._fallback(ticket, lang.language, result)
        self._thresholds[result.model_version] = result.review_threshold
        if result.side == "stable" and result.model_version != self._model_version:
            # A replica of the other generation (a rolling upgrade: Serve's router picks among
            # old and new replicas) or this directory rebuilt in place. The answer goes out
            # under its own version and review threshold, and the cache files it under that
            # version: it is never served as this router's model's.
            self._adopt(result.model_version)
        # A rolled-back canary's answers were dropped from every cache; none may come back.
        if c.cache_enabled and (result.side == "stable" or (split is not None and split.cache_canary_answers)):
            self._cache.put(cache_key(ticket, result.model_version), (result.label, result.confidence), self._clock())
            self._cache_size.set(len(self._cache))
        return self._answer(
            result.label,
            result.confidence,
            "model",
            lang.language,
            model_version=result.model_version,
            runners_up=result.runners_up,
        )

    def _fallback(self, ticket: Ticket, language: str, give_up: GiveUp) -> Answer | Refusal:
        """No model answer: a stale cached one, else the pre-classifier's best guess, else 503."""
        c = self._config
        stale = self._cache.get_stale(cache_key(ticket, self._model_version)) if c.cache_enabled else None
        guess = None
        if c.degraded_enabled and self._pre_classifier is not None:
            guess = self._pre_classifier.predict(ticket.text)
        if edge := fallback_answer(give_up.then, stale, guess):
            others = guess.runners_up if edge.route == "degraded" and guess is not None else ()
            return self._answer(edge.label, edge.confidence, edge.route, language, degraded=True, runners_up=others)
        self._routes.inc(tags={"route": "refused"})
        return Refusal(
            503, "overloaded", f"the model path gave no answer ({give_up.reason}); retry later", c.retry_after_s
        )

    def _answer(
        self,
        label: str,
        confidence: float,
        route: Route,
        language: str,
        answer_id: str | None = None,
        degraded: bool = False,
        model_version: str | None = None,
        runners_up: RunnersUp = (),
    ) -> Answer:
        """`model_version`: of the side that answered; default stable's."""
        self._routes.inc(tags={"route": route})
        version = model_version or self._model_version
        threshold = self._thresholds.get(version)
        return Answer(label, confidence, route, version, language, answer_id, degraded, threshold, runners_up)

    def _adopt(self, version: str) -> None:
        """If the model directory now holds the answering version (rebuilt in place and the
        replica restarted under this router), this router serves it from now on. The file is
        read again only once it has changed: in a rolling upgrade every answer of the old
        generation comes here."""
        mtime_ns = metadata_mtime_ns(self._model_dir)
        if mtime_ns != self._metadata_mtime_ns:
            self._metadata_mtime_ns = mtime_ns
            try:
                self._dir_version = ModelMetadata.load(self._model_dir).version
            except FileNotFoundError:
                self._dir_version = None
        if self._dir_version == version:
            self._on_new_model(version)

    def _on_new_model(self, version: str) -> None:
        """The stable replica was redeployed under us: no answer of the old model may be served again."""
        logger.info("model version changed from %s to %s; result cache cleared", self._model_version, version)
        self._model_version = version
        self._cache.clear()
        if self._pre_classifier is not None:
            try:
                self._pre_classifier = self._load_pre_classifier()
            except RuntimeError as e:
                logger.warning("route edge_model is off: %s", e)
                self._pre_classifier = None

    def stats(self) -> dict[str, Any]:
        return {
            "cache_entries": len(self._cache),
            "cache_evicted": self._cache.evicted,
            "model_give_ups": dict(self._model_path.give_ups),
            "model_retries": dict(self._model_path.retries),
            # Stable's calls and the tickets they carried, with micro-batching on.
            "micro_batched": dict(self._model_path.batcher.sent) if self._model_path.batcher else None,
            # First calls, copies sent and copies that answered first, with hedging on.
            "hedges": dict(self._model_path.hedges) if self._model_path.hedger else None,
        }

    async def ping(self) -> str:
        return "ok"
