"""The one percentile of every load figure: nearest rank (the same as the policies'
latency windows), so that a P99 of the load suite, a benchmark and a reliability test
mean the same."""

from __future__ import annotations

from collections.abc import Sequence

from policies.window import nearest_rank


def percentile(values: Sequence[float], q: float, digits: int | None = None) -> float | None:
    """q in 0..100; None without values; rounded to `digits` when given."""
    if not values:
        return None
    value = nearest_rank(sorted(values), q / 100)
    return value if digits is None else round(value, digits)
