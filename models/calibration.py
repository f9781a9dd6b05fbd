"""What the build learns from its validation split, as plain functions of arrays.

Temperature scaling (Guo et al., 2017) turns the classifier's softmax into a probability
without changing its argmax; the review threshold, the out-of-scope rule and the edge
pre-classifier's gate per language are then read off the calibrated validation answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def nll(logits: np.ndarray, y: np.ndarray, temperature: float) -> float:
    p = softmax(logits, temperature)
    return float(-np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None)).mean())


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The temperature in [0.05, 20] minimizing validation NLL: a log-spaced grid, then a
    finer one around the best (NLL is convex in 1/T, so a grid cannot land in a wrong basin)."""
    grid = np.exp(np.linspace(np.log(0.05), np.log(20.0), 200))
    best = min(grid, key=lambda t: nll(logits, y, t))
    fine = np.linspace(best * 0.95, best * 1.05, 41)
    return float(min(fine, key=lambda t: nll(logits, y, t)))


def expected_calibration_error(probs: np.ndarray, y: np.ndarray, bins: int = 15) -> float:
    """Top-label ECE: the bin-weighted gap between confidence and accuracy."""
    return answer_calibration_error(probs.max(axis=-1), probs.argmax(axis=-1) == y, bins)


def answer_calibration_error(confidence: np.ndarray, right: np.ndarray, bins: int = 15) -> float:
    """ECE of answers given as (confidence, right or not), e.g. as a served graph returned them."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (confidence > lo) & (confidence <= hi)
        if inside.any():
            ece += inside.mean() * abs(confidence[inside].mean() - right[inside].mean())
    return float(ece)


def reliability_bins(probs: np.ndarray, y: np.ndarray, bins: int = 10) -> list[tuple[float, float, int]]:
    """(mean confidence, accuracy, count) per non-empty confidence bin, for the diagram."""
    conf = probs.max(axis=-1)
    right = probs.argmax(axis=-1) == y
    edges = np.linspace(0.0, 1.0, bins + 1)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            out.append((float(conf[inside].mean()), float(right[inside].mean()), int(inside.sum())))
    return out


def review_threshold(confidence_of_right: np.ndarray, max_flagged: float = 0.05) -> float:
    """The highest threshold that flags at most `max_flagged` of the right answers: those
    with confidence strictly below it are flagged."""
    if len(confidence_of_right) == 0:
        return 0.0
    ranked = np.sort(confidence_of_right)
    allowed = int(np.floor(max_flagged * len(ranked)))
    return float(ranked[allowed]) if allowed < len(ranked) else float(ranked[-1])


def review_tradeoff(
    confidence: np.ndarray, right: np.ndarray, always: np.ndarray, never: np.ndarray | None = None
) -> list[tuple[float, float, float]]:
    """(threshold, share of right answers flagged, share of answers wrong and unflagged) for
    thresholds 0.00-1.00: an answer is flagged when `always` (out_of_scope) or below the
    threshold, unless `never` (a template's)."""
    never = np.zeros(len(confidence), dtype=bool) if never is None else never
    out = []
    for t in np.round(np.arange(0.0, 1.0001, 0.01), 2):
        flag = ~never & (always | (confidence < t))
        out.append(
            (
                float(t),
                float(flag[right].mean()) if right.any() else 0.0,
                float((~flag & ~right).mean()) if len(right) else 0.0,
            )
        )
    return out


@dataclass(frozen=True)
class Flagging:
    """Out-of-scope recall against the share of right in-scope answers flagged."""

    method: str
    oos_recall: float
    in_scope_flagged: float


def compare_oos_methods(probs: np.ndarray, y: np.ndarray, oos_index: int, threshold: float) -> list[Flagging]:
    """Three ways to flag a ticket as fitting no label, on calibrated validation answers:
    the explicit class wins the argmax; the best in-scope probability is below the
    threshold; either."""
    oos = y == oos_index
    pred = probs.argmax(axis=-1)
    in_scope_best = np.delete(probs, oos_index, axis=-1).max(axis=-1)
    right_in_scope = (~oos) & (pred == y)
    rules = {
        "explicit class": pred == oos_index,
        "threshold on calibrated probability": in_scope_best < threshold,
        "class or threshold": (pred == oos_index) | (in_scope_best < threshold),
    }
    return [
        Flagging(
            name,
            float(flag[oos].mean()) if oos.any() else 0.0,
            float(flag[right_in_scope].mean()) if right_in_scope.any() else 0.0,
        )
        for name, flag in rules.items()
    ]


def edge_gate(edge_conf: np.ndarray, edge_right: np.ndarray, model_right: np.ndarray) -> float:
    """The lowest pre-classifier confidence at which its answers on these validation
    tickets are at least as accurate as the model's on the same tickets; 1.0 (never
    above, so the edge stays silent) when no gate achieves that with at least one answer."""
    for gate in np.round(np.arange(0.30, 1.0, 0.01), 2):
        taken = edge_conf >= gate
        if taken.sum() >= 3 and edge_right[taken].mean() >= model_right[taken].mean():
            return float(gate)
    return 1.0
