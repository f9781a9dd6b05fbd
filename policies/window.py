"""Sliding windows: recent request latencies (p95, completions per second), events per
second, and extra work (retries, hedged copies) allowed as a share of the requests of a time span."""

from __future__ import annotations

import math
from collections import deque


def nearest_rank(ordered: list[float], q: float) -> float:
    """The q-quantile (q in 0..1) of sorted, non-empty `ordered`, by nearest rank."""
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


class LatencyWindow:
    def __init__(self, span_s: float, max_samples: int = 10_000):
        if span_s <= 0:
            raise ValueError(f"span_s must be > 0, got {span_s}")
        self._span_s = span_s
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)

    def add(self, latency_ms: float, now: float) -> None:
        self._samples.append((now, latency_ms))

    def p95_ms(self, now: float) -> float | None:
        return self.quantile_ms(0.95, now)

    def quantile_ms(self, q: float, now: float) -> float | None:
        values = sorted(ms for _, ms in self._recent(now))
        return nearest_rank(values, q) if values else None

    def rate_per_s(self, now: float) -> float:
        return len(self._recent(now)) / self._span_s

    def _recent(self, now: float) -> list[tuple[float, float]]:
        while self._samples and self._samples[0][0] <= now - self._span_s:
            self._samples.popleft()
        return list(self._samples)


class EventRate:
    """Events over the last `span_s`: their count, or per second."""

    def __init__(self, span_s: float):
        if span_s <= 0:
            raise ValueError(f"span_s must be > 0, got {span_s}")
        self._span_s = span_s
        self._times: deque[float] = deque()

    def add(self, now: float) -> None:
        self._times.append(now)

    def count(self, now: float) -> int:
        while self._times and self._times[0] <= now - self._span_s:
            self._times.popleft()
        return len(self._times)

    def per_s(self, now: float) -> float:
        return self.count(now) / self._span_s


class ShareBudget:
    """Extra tries allowed: at most `percent` of the requests of the last `window_s`, and
    always `floor` per window, so a quiet service can still spend some."""

    def __init__(self, percent: float, window_s: float, floor: int = 0):
        self._percent = percent
        self._floor = floor
        self._requests = EventRate(window_s)
        self._spent = EventRate(window_s)

    def record_request(self, now: float) -> None:
        self._requests.add(now)

    def try_spend(self, now: float) -> bool:
        """Takes one extra try from the budget if there is one left."""
        allowed = max(self._floor, self._requests.count(now) * self._percent / 100)
        if self._spent.count(now) + 1 > allowed:
            return False
        self._spent.add(now)
        return True
