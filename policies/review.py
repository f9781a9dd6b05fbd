"""Which answers a person should check: out-of-scope ones, and those below the review
threshold of the model that gave them."""

from __future__ import annotations

from models.artifacts import OUT_OF_SCOPE

# Models built without a validation split carry no review threshold of their own.
DEFAULT_REVIEW_CONFIDENCE = 0.5


def needs_review(label: str, confidence: float, route: str, configured: float | None, model: float | None) -> bool:
    """`configured`: the config's threshold for every answer; else `model`, the answering
    model's calibrated one (a canary's own, or the other generation's in a rolling upgrade:
    never the threshold of a model that did not answer). Template answers are the
    operator's own wording and never flagged."""
    if route == "template":
        return False
    threshold = next(t for t in (configured, model, DEFAULT_REVIEW_CONFIDENCE) if t is not None)
    return label == OUT_OF_SCOPE or confidence < threshold
