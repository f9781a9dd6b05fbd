"""The labels a classifier ranked next after its answer: what a reviewer is offered first."""

from __future__ import annotations

from collections.abc import Sequence

# (label, probability) pairs, most probable first.
RunnersUp = tuple[tuple[str, float], ...]


def runners_up(labels: Sequence[str], probs: Sequence[float], count: int = 2) -> RunnersUp:
    """The `count` most probable labels after the best one, rounded for display."""
    order = sorted(range(len(labels)), key=lambda i: probs[i], reverse=True)
    return tuple((labels[i], round(float(probs[i]), 6)) for i in order[1 : count + 1])
