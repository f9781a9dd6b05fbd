"""What the service answers, as metrics: labels, confidence per route, review flags and how
far the recent label mix has drifted from the model's training mix (policies/label_drift)."""

from __future__ import annotations

from ray.serve.metrics import Counter, Histogram

from deployments.metrics.held_gauge import HeldGauge
from deployments.metrics.metric_tags import tag_keys
from models.artifacts import OUT_OF_SCOPE
from policies.label_drift import LabelDrift, LabelDriftConfig

# Calibrated confidence: fine steps near the top, where the review threshold sits.
CONFIDENCE_BOUNDARIES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]


class AnswerMetrics:
    """One per ingress replica. Tag values are bounded: labels are the model's own (unknown
    ones count as "other") and routes are the graph's fixed few."""

    def __init__(self, labels: list[str], training_mix: dict[str, int], drift: LabelDriftConfig):
        self._labels = frozenset(labels)
        self._answers = Counter(
            "ticket_answers_total",
            description="Tickets answered, by label and route.",
            tag_keys=tag_keys("label", "route"),
        )
        self._confidence = Histogram(
            "ticket_answer_confidence",
            description="Confidence of answered tickets, by route.",
            boundaries=CONFIDENCE_BOUNDARIES,
            tag_keys=("route",),
        )
        self._review = Counter(
            "ticket_needs_review_total", description="Answers flagged needs_review, by route.", tag_keys=("route",)
        )
        self._drift_gauge = HeldGauge(
            "ticket_label_drift",
            description="Jensen-Shannon distance (0-1) of the recent in-scope answers' label mix from the training mix.",
        )
        # Models built without a recorded mix (older builds, other tools) report no drift.
        mix = {label: float(count) for label, count in training_mix.items()}
        self._drift = LabelDrift(drift, mix, frozenset({OUT_OF_SCOPE})) if mix else None

    def answered(self, label: str, route: str, confidence: float, needs_review: bool) -> None:
        label = label if label in self._labels else "other"
        self._answers.inc(tags={"label": label, "route": route})
        self._confidence.observe(confidence, tags={"route": route})
        if needs_review:
            self._review.inc(tags={"route": route})
        if self._drift is not None:
            self._drift.add(label)
            distance = self._drift.distance()
            if distance is not None:
                self._drift_gauge.set(distance)
