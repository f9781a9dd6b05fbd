"""What the canary judge weighs: the live figures callers report, and both sides' answers
to the golden set and the canary's reviewed set."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

from ray.serve.handle import DeploymentHandle

from models.artifacts import REVIEWED_SET_FILE, read_labelled_rows
from models.golden import GoldenItem
from policies.canary import COLORS, CanaryStats, Side
from policies.rollout import SyncReport
from policies.window import nearest_rank

LATENCY_SAMPLES = 10_000
GOLDEN_CONCURRENCY = 8


class LiveFigures:
    """What callers reported since the split last changed."""

    def __init__(self) -> None:
        self.latency_ms: dict[Side, collections.deque[float]] = {
            side: collections.deque(maxlen=LATENCY_SAMPLES) for side in COLORS
        }
        self.canary_errors = 0
        self.compared = 0
        self.agreed = 0

    def add(self, report: SyncReport) -> None:
        self.latency_ms["stable"].extend(report.stable_ms)
        self.latency_ms["canary"].extend(report.canary_ms)
        self.canary_errors += report.canary_errors
        self.compared += report.compared
        self.agreed += report.agreed

    def stats(self, golden: dict[str, Any]) -> CanaryStats:
        """The judge's snapshot: these figures and the last golden run's."""

        def p99(side: Side) -> float | None:
            samples = sorted(self.latency_ms[side])
            return nearest_rank(samples, 0.99) if samples else None

        return CanaryStats(
            compared=self.compared + golden.get("compared", 0),
            agreed=self.agreed + golden.get("agreed", 0),
            canary_answers=len(self.latency_ms["canary"]) + self.canary_errors,
            canary_errors=self.canary_errors,
            canary_p99_ms=p99("canary"),
            stable_p99_ms=p99("stable"),
            stable_answers=len(self.latency_ms["stable"]),
            golden_canary_accuracy=golden.get("canary_accuracy"),
            golden_stable_accuracy=golden.get("stable_accuracy"),
            reviewed_canary_accuracy=golden.get("reviewed_canary_accuracy"),
            reviewed_stable_accuracy=golden.get("reviewed_stable_accuracy"),
        )


def reviewed_set(model_dir: str | None) -> list[GoldenItem]:
    """The canary's reviewed set (models.retrain writes it beside the weights); [] when it
    has none."""
    path = Path(model_dir, REVIEWED_SET_FILE) if model_dir else None
    if path is None or not path.exists():
        return []
    return [GoldenItem(text, label, lang, "model", "review") for text, label, lang in read_labelled_rows(path)]


def accuracy(answers: list[str | None], items: list[GoldenItem]) -> float:
    """Share of `items` answered with their label (no answer counts as wrong)."""
    return sum(a == item.intent for a, item in zip(answers, items)) / len(items)


def golden_sample(items: list[GoldenItem], count: int) -> list[GoldenItem]:
    """`count` items spread evenly over the file (it is ordered by intent); 0: all."""
    if count <= 0 or count >= len(items):
        return items
    return [items[i * len(items) // count] for i in range(count)]


async def ask_both(
    sides: dict[Side, DeploymentHandle], items: list[GoldenItem], request_prefix: str
) -> dict[Side, list[str | None]]:
    """Both sides' answers to `items` (raw text: each tokenizes its own way); None where a
    side failed to answer."""
    limit = asyncio.Semaphore(GOLDEN_CONCURRENCY)

    async def ask(handle: DeploymentHandle, side: str, i: int, text: str) -> str | None:
        async with limit:
            try:
                return (await handle.predict.remote(text, f"{request_prefix}-{side}-{i}")).label
            except Exception:
                return None

    return {
        side: await asyncio.gather(*(ask(handle, side, i, item.text) for i, item in enumerate(items)))
        for side, handle in sides.items()
    }
