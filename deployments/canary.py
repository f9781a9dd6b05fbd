"""Blue-green model sides: the canary controller (one actor) and its callers' view of it.

The controller owns the rollout: the canary's share of tickets, shadow mode, and the
judge (policies.canary) that rolls the canary back or promotes it. It learns the live
figures from the model path's views, which send what they saw in one call per
`sync_interval_ms` and get the split back, and asks the golden set of both sides itself.
It also owns the result caches' epoch: a bump makes every edge router drop its cache,
which is how a rollback (or an operator's flush) reaches every replica.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter, Gauge

from deployments.config import RolloutConfig
from models.golden import GoldenItem, load
from policies.canary import COLORS, CanaryStats, Decision, Side, judge, side_for
from policies.window import nearest_rank

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "CanaryController",
    "num_replicas": 1,
    "max_ongoing_requests": 1024,
    "ray_actor_options": {"num_cpus": 0},
}
# "none": no canary model; "idle": one is deployed at 0 %; "rolled_back": the judge or an
# operator took it to 0 % (its cached answers are dropped and never cached again).
Status = Literal["none", "idle", "rolling", "rolled_back", "complete"]
LATENCY_SAMPLES = 10_000
HISTORY = 50
GOLDEN_CONCURRENCY = 8


class _Live:
    """What callers reported since the split last changed."""

    def __init__(self) -> None:
        self.latency_ms: dict[Side, collections.deque[float]] = {
            side: collections.deque(maxlen=LATENCY_SAMPLES) for side in COLORS
        }
        self.canary_errors = 0
        self.compared = 0
        self.agreed = 0

    def add(self, report: dict[str, Any]) -> None:
        for side in COLORS:
            self.latency_ms[side].extend(report.get(f"{side}_ms", ()))
        self.canary_errors += report.get("canary_errors", 0)
        self.compared += report.get("compared", 0)
        self.agreed += report.get("agreed", 0)


def golden_sample(items: list[GoldenItem], count: int) -> list[GoldenItem]:
    """`count` items spread evenly over the file (it is ordered by intent); 0: all."""
    if count <= 0 or count >= len(items):
        return items
    return [items[i * len(items) // count] for i in range(count)]


class CanaryController:
    async def __init__(
        self,
        config: RolloutConfig,
        stable: DeploymentHandle,
        canary: DeploymentHandle | None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        judge_loop: bool = True,
    ):
        self._config = config
        self._stable, self._canary = stable, canary
        self._clock, self._wall = clock, wall_clock
        self._versions: dict[Side, str | None] = {
            "stable": (await stable.labels.remote())["model_version"],
            "canary": (await canary.labels.remote())["model_version"] if canary is not None else None,
        }
        self._golden_items = golden_sample(load(Path(config.golden_file)), config.golden_tickets)
        self._golden: dict[str, Any] | None = None
        self._epoch = 0
        self._generation = 0
        self._history: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY)
        self._totals = collections.Counter[str]()
        self._percent, self._shadow, self._status = 0.0, False, "none"
        if canary is not None:
            self._percent, self._shadow = config.policy.start_percent, config.shadow
            self._status = "rolling" if self._percent > 0 else "idle"
            self._restore()
        self._started = self._since = clock()
        self._live = _Live()
        self._percent_gauge = Gauge("canary_percent", description="Share of tickets routed to the canary side, 0-100.")
        self._decisions = Counter(
            "canary_decisions_total",
            description="Rollout changes by action: rollback, promote, complete (judge or operator).",
            tag_keys=("action",),
        )
        self._golden_accuracy = Gauge(
            "canary_golden_accuracy", description="Golden-set accuracy of each model side.", tag_keys=("side",)
        )
        self._percent_gauge.set(self._percent)
        self._loop = asyncio.get_running_loop().create_task(self._judge_loop()) if judge_loop and canary else None

    # --- callers ---

    def sync(self, report: dict[str, Any]) -> dict[str, Any]:
        """A view's figures since its last sync; answers the split it must apply now.
        Figures gathered under an older split are dropped: they belong to another share."""
        if report.get("generation") == self._generation:
            self._live.add(report)
        for key in ("canary_errors", "compared", "agreed"):
            self._totals[key] += report.get(key, 0)
        for side in COLORS:
            self._totals[f"{side}_answers"] += len(report.get(f"{side}_ms", ()))
        return self._split()

    def _split(self) -> dict[str, Any]:
        return {
            "percent": self._percent,
            "shadow": self._shadow,
            "status": self._status,
            "epoch": self._epoch,
            "generation": self._generation,
            "canary_version": self._versions["canary"],
        }

    # --- operators (the /admin API) ---

    def state(self) -> dict[str, Any]:
        stats = self._stats()
        return {
            **self._split(),
            "stable_version": self._versions["stable"],
            "since_s": round(self._clock() - self._since, 1),
            "uptime_s": round(self._clock() - self._started, 1),
            "live": {k: v for k, v in vars(stats).items() if not k.startswith("golden")},
            "golden": self._golden,
            "totals": dict(self._totals),
            "history": list(self._history),
        }

    def set_split(self, percent: float | None = None, shadow: bool | None = None) -> dict[str, Any]:
        self._require_canary()
        new_percent = self._percent if percent is None else percent
        status = "rolling" if new_percent > 0 else "idle"
        self._change(new_percent, self._shadow if shadow is None else shadow, status, "set", "operator")
        return self.state()

    def promote(self) -> dict[str, Any]:
        """One step now, without waiting for the hold time or the samples."""
        self._require_canary()
        step = min(100.0, max(self._percent, 0.0) + self._config.policy.step_percent)
        self._change(step, False, "rolling", "promote", "operator")
        return self.state()

    def rollback(self, reason: str = "operator") -> dict[str, Any]:
        self._require_canary()
        self._roll_back(reason)
        return self.state()

    def flush_caches(self) -> dict[str, Any]:
        """Every edge router drops its result cache at its next sync."""
        self._epoch += 1
        return {"epoch": self._epoch, "applies_within_ms": self._config.sync_interval_ms}

    async def ping(self) -> str:
        return "ok"

    # --- judging ---

    async def judge_once(self) -> Decision | None:
        if self._canary is None or self._status not in ("rolling",):
            return None
        if self._golden is None or self._golden["versions"] != self._versions:
            self._golden = await self._ask_golden()
        decision = judge(self._config.policy, self._stats(), self._percent, self._since, self._clock())
        if decision.action == "rollback":
            self._roll_back(decision.reason)
        elif decision.action == "promote" and self._shadow:
            # A shadow's answers never reached a customer: going live is an operator's call.
            return Decision("hold", self._percent, f"checks held in shadow mode ({decision.reason})")
        elif decision.action == "promote":
            self._change(decision.canary_percent, False, "rolling", "promote", decision.reason)
        elif decision.action == "complete":
            self._change(100.0, False, "complete", "complete", decision.reason)
        return decision

    async def _judge_loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.judge_interval_s)
            try:
                await self.judge_once()
            except Exception:  # a failed round (a side restarting) is judged again next time
                logger.exception("canary judge round failed")

    async def _ask_golden(self) -> dict[str, Any]:
        """Both sides answer the golden sample (raw text: each tokenizes its own way)."""
        limit = asyncio.Semaphore(GOLDEN_CONCURRENCY)

        async def ask(handle: DeploymentHandle, side: str, i: int, text: str) -> str | None:
            async with limit:
                try:
                    return (await handle.predict.remote(text, f"golden-{side}-{self._generation}-{i}"))["label"]
                except Exception:
                    return None

        items = self._golden_items
        answers = {
            side: await asyncio.gather(*(ask(handle, side, i, item.text) for i, item in enumerate(items)))
            for side, handle in (("stable", self._stable), ("canary", self._canary))
        }
        pairs = [(s, c) for s, c in zip(answers["stable"], answers["canary"]) if s is not None and c is not None]
        result = {
            "versions": dict(self._versions),
            "tickets": len(items),
            "compared": len(pairs),
            "agreed": sum(s == c for s, c in pairs),
        }
        for side in COLORS:
            accuracy = sum(a == item.intent for a, item in zip(answers[side], items)) / len(items)
            result[f"{side}_accuracy"] = round(accuracy, 4)
            self._golden_accuracy.set(accuracy, tags={"side": side})
        logger.info("golden set: stable %(stable_accuracy).3f, canary %(canary_accuracy).3f", result)
        return result

    def _stats(self) -> CanaryStats:
        live, golden = self._live, self._golden or {}

        def p99(side: Side) -> float | None:
            samples = sorted(live.latency_ms[side])
            return nearest_rank(samples, 0.99) if samples else None

        return CanaryStats(
            compared=live.compared + golden.get("compared", 0),
            agreed=live.agreed + golden.get("agreed", 0),
            canary_answers=len(live.latency_ms["canary"]) + live.canary_errors,
            canary_errors=live.canary_errors,
            canary_p99_ms=p99("canary"),
            stable_p99_ms=p99("stable"),
            golden_canary_accuracy=golden.get("canary_accuracy"),
            golden_stable_accuracy=golden.get("stable_accuracy"),
        )

    # --- state changes ---

    def _roll_back(self, reason: str) -> None:
        logger.warning("canary %s rolled back: %s", self._versions["canary"], reason)
        self._epoch += 1  # its cached answers go everywhere
        self._change(0.0, False, "rolled_back", "rollback", reason)

    def _change(self, percent: float, shadow: bool, status: Status, action: str, reason: str) -> None:
        self._history.append(
            {
                "at_unix_s": round(self._wall(), 3),
                "action": action,
                "from_percent": self._percent,
                "to_percent": percent,
                "shadow": shadow,
                "reason": reason,
                "canary_version": self._versions["canary"],
            }
        )
        if action != "set":
            self._decisions.inc(tags={"action": action})
        self._percent, self._shadow, self._status = percent, shadow, status
        self._since, self._live, self._generation = self._clock(), _Live(), self._generation + 1
        self._percent_gauge.set(percent)
        self._save()

    def _require_canary(self) -> None:
        if self._canary is None:
            raise NoCanary("no canary model is deployed (rollout.canary_model_dir is null)")

    def _save(self) -> None:
        path = Path(self._config.state_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "canary_version": self._versions["canary"],
            "percent": self._percent,
            "shadow": self._shadow,
            "status": self._status,
            "history": list(self._history),
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(path)

    def _restore(self) -> None:
        """The saved rollout of this same canary version wins over the configured start:
        a rolled-back canary must not come back because its controller restarted."""
        path = Path(self._config.state_path)
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            logger.warning("canary state %s unreadable, starting over: %s", path, e)
            return
        if saved.get("canary_version") != self._versions["canary"]:
            return
        self._percent, self._shadow, self._status = saved["percent"], saved["shadow"], saved["status"]
        self._history.extend(saved.get("history", ()))


class NoCanary(Exception):
    """A rollout action without a canary model."""


class CanaryView:
    """A caller's copy of the split, refreshed every `sync_interval_s` by a loop that also
    sends the caller's figures: a rollback or a cache flush reaches idle callers too.

    Without the controller every ticket goes to stable: an unjudged canary takes no
    customers. The cache epoch stays as last seen.
    """

    def __init__(
        self,
        controller: DeploymentHandle,
        sync_interval_s: float,
        timeout_s: float,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        self._controller = controller
        self._interval_s = sync_interval_s
        self._timeout_s = timeout_s
        self._sleep = sleep
        self.split: dict[str, Any] = {
            "percent": 0.0,
            "shadow": False,
            "status": "none",
            "epoch": 0,
            "generation": -1,
            "canary_version": None,
        }
        self._report = self._empty()
        self._loop: asyncio.Task | None = None
        self.unreachable = 0

    async def start(self) -> None:
        """The first split before the first ticket, then the loop."""
        await self.sync()
        self._loop = asyncio.get_running_loop().create_task(self._sync_loop())

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()

    def _empty(self) -> dict[str, Any]:
        return {"stable_ms": [], "canary_ms": [], "canary_errors": 0, "compared": 0, "agreed": 0}

    def route(self, ticket_key: str, color: str | None) -> tuple[Side, bool]:
        """(side that answers, whether the canary also answers a shadow copy)."""
        if self.split["canary_version"] is None:
            return "stable", False
        if color in COLORS:
            return color, False  # type: ignore[return-value]
        if side_for(ticket_key, self.split["percent"]) == "stable":
            return "stable", False
        return ("stable", True) if self.split["shadow"] else ("canary", False)

    @property
    def canary_version(self) -> str | None:
        return self.split["canary_version"]

    @property
    def epoch(self) -> int:
        return self.split["epoch"]

    @property
    def cache_canary_answers(self) -> bool:
        return self.split["status"] != "rolled_back"

    def record(self, side: Side, latency_ms: float, failed: bool) -> None:
        if self.split["canary_version"] is None:
            return
        if failed:
            self._report["canary_errors"] += side == "canary"
        else:
            self._report[f"{side}_ms"].append(latency_ms)

    def record_shadow(self, agreed: bool) -> None:
        self._report["compared"] += 1
        self._report["agreed"] += agreed

    async def _sync_loop(self) -> None:
        while True:
            await self._sleep(self._interval_s)
            await self.sync()

    async def sync(self) -> None:
        report, self._report = {**self._report, "generation": self.split["generation"]}, self._empty()
        try:
            self.split = await asyncio.wait_for(self._controller.sync.remote(report), self._timeout_s)
        except Exception:
            self.unreachable += 1
            self.split = {**self.split, "percent": 0.0, "shadow": False}
