"""The audit: a random share of the answers nobody flagged goes to a person as well, the
only way a confident wrong answer is ever seen (customer-service QA samples the same
way). From the checked ones, the share of unflagged answers that are wrong."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Two-sided 95 % normal quantile.
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class AuditEstimate:
    checked: int  # audited answers a person has resolved
    wrong: int  # of them, resolved with another label than the answer's
    wrong_share: float | None  # None until one is checked
    interval95: tuple[float, float] | None  # Wilson score interval of wrong_share


def should_audit(route: str, flagged: bool, share: float, draw: float) -> bool:
    """`draw` is uniform in [0, 1). A cached answer repeats one that was drawn (or not) the
    first time; a flagged one is in the review queue already."""
    return not flagged and route != "cache" and draw < share


def wilson_interval(wrong: int, checked: int, z: float = Z_95) -> tuple[float, float]:
    """Stays inside [0, 1] and is not empty at 0 or `checked` wrong, where the normal
    approximation's interval collapses: the audit's wrong share is small and so are samples."""
    if checked <= 0:
        raise ValueError(f"checked={checked}: the interval needs at least one checked answer")
    if not 0 <= wrong <= checked:
        raise ValueError(f"wrong={wrong}: must be between 0 and checked={checked}")
    p = wrong / checked
    denominator = 1 + z * z / checked
    centre = (p + z * z / (2 * checked)) / denominator
    half = z * math.sqrt(p * (1 - p) / checked + z * z / (4 * checked * checked)) / denominator
    # Exact at the ends: the bound is 0 or 1 there, and float rounding must not cross it.
    return (0.0 if wrong == 0 else centre - half), (1.0 if wrong == checked else centre + half)


def audit_estimate(checked: int, wrong: int) -> AuditEstimate:
    if checked == 0:
        return AuditEstimate(0, 0, None, None)
    low, high = wilson_interval(wrong, checked)
    return AuditEstimate(checked, wrong, round(wrong / checked, 4), (round(low, 4), round(high, 4)))
