"""Canary rollout judged by answers: which side a ticket goes to, and whether the canary
is rolled back, held or promoted a step.

The split hashes the ticket id, so one ticket always lands on the same side and raising
the weight only moves tickets from stable to canary. A colouring header overrides it;
in shadow mode stable answers and the canary's answers are only recorded. The judge
compares the canary with stable on live traffic (answer agreement on shadowed or
compared tickets, relaxed for a candidate better on its reviewed set: `agreement_floor`;
P99, error rate), on the golden set (accuracy) and, for a candidate
retrained from reviews, on its reviewed set (accuracy on resolved items it never trained
on: it must be better there to be promoted); any threshold broken rolls back to 0 % at
once, all of them held for `hold_s` promote by `step_percent`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Side = Literal["stable", "canary"]
COLORS: tuple[Side, ...] = ("stable", "canary")


class CanaryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_percent: float = Field(5.0, ge=0, le=100, description="canary traffic share when a rollout starts")
    step_percent: float = Field(10.0, gt=0, le=100, description="added to the canary share at each promotion")
    hold_s: float = Field(300.0, ge=0, description="every threshold must hold this long before a promotion")
    min_compared: int = Field(50, ge=1, description="tickets both sides answered before agreement counts")
    min_canary_answers: int = Field(50, ge=1, description="canary answers before its error rate counts")
    # Below 100 answers a P99 is the slowest one: one call that met a busy moment of the node
    # rolls back a canary no slower than stable (a shared 2-core node: 254 ms against 164 ms
    # over 20 answers, for two copies of the same architecture).
    min_p99_answers: int = Field(
        100,
        ge=1,
        description="answers of each side before their P99s are compared; canary answers before it is promoted",
    )
    min_agreement: float = Field(0.9, ge=0, le=1, description="share of compared tickets both sides label alike")
    max_golden_drop: float = Field(
        0.03, ge=0, le=1, description="golden-set accuracy the canary may lose against stable"
    )
    max_p99_ratio: float = Field(1.5, gt=0, description="canary P99 / stable P99 allowed")
    max_error_rate_percent: float = Field(1.0, ge=0, le=100, description="canary errors per answer allowed")
    max_reviewed_drop: float = Field(
        0.05, ge=0, le=1, description="reviewed-set accuracy the canary may lose against stable before a rollback"
    )
    min_reviewed_gain: float = Field(
        0.01,
        ge=0,
        le=1,
        description="reviewed-set accuracy the canary must gain over stable to be promoted (capped at stable's "
        "distance to 1.0): a candidate no better on what people corrected stays where it is",
    )
    max_unproven_s: float | None = Field(
        None,
        gt=0,
        description="a canary held this long at one share for not being better on its reviewed set is rolled "
        "back, a verdict instead of a wait; null: it is held until a newer candidate replaces it",
    )
    shadow_goes_live: bool = Field(
        False,
        description="a shadow canary that held every check for hold_s goes live at start_percent by itself; "
        "false: going live is an operator's call",
    )


def side_for(ticket_key: str, canary_percent: float, color: str | None = None) -> Side:
    """`color` (the X-Traffic-Color header) wins when it names a side."""
    if color in COLORS:
        return color  # type: ignore[return-value]
    point = int.from_bytes(hashlib.blake2b(ticket_key.encode(), digest_size=8).digest(), "big") / 2**64 * 100
    return "canary" if point < canary_percent else "stable"


@dataclass(frozen=True)
class CanaryStats:
    """What the controller has seen since the canary's share last changed."""

    compared: int  # tickets answered by both sides (shadow or golden)
    agreed: int
    canary_answers: int
    canary_errors: int
    canary_p99_ms: float | None
    stable_p99_ms: float | None
    # Stable's live answers in the window: none at 100 % but the few the callers sent before
    # they saw the new split, at no load, against a canary that carries all of it.
    stable_answers: int
    golden_canary_accuracy: float | None  # None: the golden set was not run against this canary yet
    golden_stable_accuracy: float | None
    # The canary's reviewed set (resolved review items it never trained on, models.retrain);
    # None: it has none, or it was not run yet.
    reviewed_canary_accuracy: float | None = None
    reviewed_stable_accuracy: float | None = None


@dataclass(frozen=True)
class Decision:
    action: Literal["hold", "rollback", "promote", "complete"]
    canary_percent: float
    reason: str


def p99_answers(c: CanaryConfig) -> int:
    """Canary answers before its P99 counts, and before it may be promoted."""
    return max(c.min_canary_answers, c.min_p99_answers)


def reviewed_gain_needed(c: CanaryConfig, stable_accuracy: float) -> float:
    """Reviewed-set accuracy a canary must gain over stable to be promoted: at most what
    stable leaves to gain."""
    return min(c.min_reviewed_gain, 1.0 - stable_accuracy)


def agreement_floor(c: CanaryConfig, s: CanaryStats) -> float:
    """`min_agreement`, except for a candidate better on its reviewed set: it was trained
    to change stable's wrong answers, and two models as accurate as the golden set says
    may disagree on up to (1 - stable's accuracy) + (1 - its own) of tickets. A model that
    learns a new taxonomy fast (a few rows per label, then reviews) corrects far more than
    a tenth of stable's answers."""
    golden_s, golden_c = s.golden_stable_accuracy, s.golden_canary_accuracy
    reviewed_s, reviewed_c = s.reviewed_stable_accuracy, s.reviewed_canary_accuracy
    if golden_s is None or golden_c is None or reviewed_s is None or reviewed_c is None:
        return c.min_agreement
    # A real gain: where stable leaves none to gain, a tie does not count as correcting it.
    if reviewed_c - reviewed_s < max(reviewed_gain_needed(c, reviewed_s), 1e-9):
        return c.min_agreement
    return min(c.min_agreement, golden_s + golden_c - 1.0)


def judge(config: CanaryConfig, stats: CanaryStats, canary_percent: float, since: float, now: float) -> Decision:
    """`canary_percent` is the current share, set at `since`. Broken thresholds are read
    first (a rollback cannot wait for the hold time); a promotion needs every check to
    have had its samples."""
    c, s = config, stats
    broken = []
    golden = s.golden_canary_accuracy is not None and s.golden_stable_accuracy is not None
    # Agreement waits for the golden run, which brings the reviewed set's too: live
    # comparisons alone reach min_compared first, and would be held to the fixed floor.
    floor = agreement_floor(c, s)
    if golden and s.compared >= c.min_compared and s.agreed / s.compared < floor:
        broken.append(f"agreement {s.agreed / s.compared:.3f} < {floor:.3f}")
    if golden and s.golden_stable_accuracy - s.golden_canary_accuracy > c.max_golden_drop:
        broken.append(
            f"golden accuracy {s.golden_canary_accuracy:.3f} vs stable {s.golden_stable_accuracy:.3f} "
            f"(allowed drop {c.max_golden_drop})"
        )
    reviewed = s.reviewed_canary_accuracy is not None and s.reviewed_stable_accuracy is not None
    if reviewed and s.reviewed_stable_accuracy - s.reviewed_canary_accuracy > c.max_reviewed_drop:
        broken.append(
            f"reviewed-set accuracy {s.reviewed_canary_accuracy:.3f} vs stable {s.reviewed_stable_accuracy:.3f} "
            f"(allowed drop {c.max_reviewed_drop})"
        )
    if s.canary_answers >= c.min_canary_answers:
        error_rate = 100 * s.canary_errors / s.canary_answers
        if error_rate > c.max_error_rate_percent:
            broken.append(f"error rate {error_rate:.2f} % > {c.max_error_rate_percent} %")
    # P99 against P99 only where both sides answered enough of the same traffic.
    if s.canary_answers >= p99_answers(c) and s.stable_answers >= c.min_p99_answers:
        if s.canary_p99_ms is not None and s.stable_p99_ms and s.canary_p99_ms / s.stable_p99_ms > c.max_p99_ratio:
            broken.append(
                f"P99 {s.canary_p99_ms:.0f} ms vs stable {s.stable_p99_ms:.0f} ms (allowed x{c.max_p99_ratio})"
            )
    if broken:
        return Decision("rollback", 0.0, "; ".join(broken))
    if canary_percent <= 0:
        return Decision("hold", 0.0, "no rollout")
    sampled = s.compared >= c.min_compared and s.canary_answers >= p99_answers(c) and golden
    if not sampled:
        return Decision("hold", canary_percent, "waiting for samples")
    if reviewed:
        gain = reviewed_gain_needed(c, s.reviewed_stable_accuracy)
        if s.reviewed_canary_accuracy - s.reviewed_stable_accuracy < gain:
            why = (
                f"not better on the reviewed set: {s.reviewed_canary_accuracy:.3f} vs stable "
                f"{s.reviewed_stable_accuracy:.3f} (needs +{gain:.3f})"
            )
            if c.max_unproven_s is not None and now - since >= c.max_unproven_s:
                return Decision("rollback", 0.0, f"{why} for {now - since:.0f} s")
            return Decision("hold", canary_percent, why)
    if now - since < c.hold_s:
        return Decision("hold", canary_percent, f"holding {now - since:.0f} of {c.hold_s:.0f} s")
    if canary_percent >= 100:
        return Decision("complete", 100.0, "canary took all traffic with every check held")
    return Decision("promote", min(100.0, canary_percent + c.step_percent), "every check held")
