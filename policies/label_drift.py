"""How far the recent mix of answered labels has moved from the mix the model was trained on.

A broken upstream form (every ticket now "other"), a new product line or a spam wave shows
first as a change in what the service answers, long before anyone reads the tickets. The
distance is Jensen-Shannon's (base 2: 0 same mix, 1 disjoint), symmetric and finite even
where one side has a label the other lacks, over the last `window_answers` answers; too few
answers make a noisy mix, so none is reported before `min_answers`.

`excluded` labels count on neither side: the out-of-scope class is a third of the bundled
training rows (the model must learn its breadth), far from any inbox's share, and has a
rate of its own to watch. Traffic never has the training mix, so the level says how this
inbox differs from the training data; a step in it is the news (docs/observability.md).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field


class LabelDriftConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    window_answers: int = Field(2000, ge=1, description="recent answers the label mix is read from")
    min_answers: int = Field(200, ge=1, description="answers needed in the window before a distance is reported")


def js_distance(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Jensen-Shannon distance (square root of the divergence, base 2) of two label mixes;
    each is normalized here, so counts do as well as shares."""
    labels = set(p) | set(q)
    sp, sq = sum(p.values()), sum(q.values())
    if sp <= 0 or sq <= 0:
        raise ValueError("both mixes need a positive total")

    def kl(a: Mapping[str, float], sa: float, b: Mapping[str, float], sb: float) -> float:
        # Kullback-Leibler of `a` to the midpoint mixture of a and b.
        total = 0.0
        for label in labels:
            pa = a.get(label, 0.0) / sa
            if pa > 0:
                m = (pa + b.get(label, 0.0) / sb) / 2
                total += pa * math.log2(pa / m)
        return total

    divergence = (kl(p, sp, q, sq) + kl(q, sq, p, sp)) / 2
    return math.sqrt(max(0.0, min(1.0, divergence)))


class LabelDrift:
    """The recent answers' label mix against a reference mix (the training data's)."""

    def __init__(
        self, config: LabelDriftConfig, reference: Mapping[str, float], excluded: frozenset[str] = frozenset()
    ):
        self._reference = {label: n for label, n in reference.items() if label not in excluded}
        if sum(self._reference.values()) <= 0:
            raise ValueError(f"reference mix needs a positive total outside {sorted(excluded)}, got {reference!r}")
        self._config = config
        self._excluded = excluded
        self._recent: deque[str] = deque(maxlen=config.window_answers)
        self._counts: Counter[str] = Counter()

    def add(self, label: str) -> None:
        if label in self._excluded:
            return
        if len(self._recent) == self._recent.maxlen:
            gone = self._recent[0]
            self._counts[gone] -= 1
            if not self._counts[gone]:
                del self._counts[gone]
        self._recent.append(label)
        self._counts[label] += 1

    def distance(self) -> float | None:
        if len(self._recent) < self._config.min_answers:
            return None
        return js_distance(dict(self._counts), self._reference)
