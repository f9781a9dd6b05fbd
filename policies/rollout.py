"""The rollout's state machine: the canary's share, shadow mode and status, changed by an
operator or by the judge's decision (policies.canary), and the history of changes.

Statuses: "none" (no canary model), "idle" (deployed at 0 %), "rolling" (judged),
"rolled_back" (the judge or an operator took it to 0 %; its cached answers are dropped
and never cached again), "complete" (100 % with every check held). Every change starts
a new generation: figures gathered under an older split belong to another share.
The controller passes the clocks' readings and does the I/O (metrics, the state file).
"""

from __future__ import annotations

import collections
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from policies.canary import Decision

Status = Literal["none", "idle", "rolling", "rolled_back", "complete"]
Action = Literal["set", "promote", "rollback", "complete", "new_canary", "stable"]
HISTORY = 50


@dataclass(frozen=True)
class Split:
    """What every caller applies, the controller's answer to a sync."""

    percent: float = 0.0
    shadow: bool = False
    status: Status = "none"
    epoch: int = 0  # result caches: a caller seeing a new epoch drops its cache
    generation: int = -1
    canary_version: str | None = None


@dataclass
class SyncReport:
    """A caller's figures since its last sync, gathered under split `generation`."""

    generation: int = -1
    stable_ms: list[float] = field(default_factory=list)
    canary_ms: list[float] = field(default_factory=list)
    canary_errors: int = 0
    compared: int = 0  # shadow copies answered by both sides
    agreed: int = 0


@dataclass(frozen=True)
class Change:
    at_unix_s: float
    action: Action
    from_percent: float
    to_percent: float
    shadow: bool
    reason: str
    canary_version: str | None


class Rollout:
    def __init__(self, canary_version: str | None, start_percent: float, shadow: bool, now: float):
        self.canary_version = canary_version
        self.percent: float = 0.0
        self.shadow: bool = False
        self.status: Status = "none"
        if canary_version is not None:
            self.percent, self.shadow = start_percent, shadow
            self.status = "rolling" if start_percent > 0 else "idle"
        self.history: collections.deque[Change] = collections.deque(maxlen=HISTORY)
        self.since = now
        self.epoch = 0
        self.generation = 0

    @property
    def judged(self) -> bool:
        return self.canary_version is not None and self.status == "rolling"

    def split(self) -> Split:
        return Split(self.percent, self.shadow, self.status, self.epoch, self.generation, self.canary_version)

    def saved(self) -> dict[str, Any]:
        """What outlives the controller (the state file)."""
        return {
            "canary_version": self.canary_version,
            "percent": self.percent,
            "shadow": self.shadow,
            "status": self.status,
            "history": [asdict(c) for c in self.history],
        }

    def restore(self, saved: dict[str, Any]) -> bool:
        """The saved rollout of this same canary version wins over the configured start:
        a rolled-back canary must not come back because its controller restarted."""
        if self.canary_version is None or saved.get("canary_version") != self.canary_version:
            return False
        self.percent, self.shadow, self.status = saved["percent"], saved["shadow"], saved["status"]
        self.history.extend(Change(**c) for c in saved.get("history", ()))
        return True

    def set_split(self, percent: float | None, shadow: bool | None, now: float, at_unix_s: float) -> Change:
        new_percent = self.percent if percent is None else percent
        status = "rolling" if new_percent > 0 else "idle"
        shadow = self.shadow if shadow is None else shadow
        return self._change(new_percent, shadow, status, "set", "operator", now, at_unix_s)

    def promote(self, step_percent: float, reason: str, now: float, at_unix_s: float) -> Change:
        """One step up; shadow mode ends (answers go to customers)."""
        step = min(100.0, max(self.percent, 0.0) + step_percent)
        return self._change(step, False, "rolling", "promote", reason, now, at_unix_s)

    def rollback(self, reason: str, now: float, at_unix_s: float) -> Change:
        self.epoch += 1  # the canary's cached answers are dropped everywhere
        return self._change(0.0, False, "rolled_back", "rollback", reason, now, at_unix_s)

    def apply(
        self, decision: Decision, now: float, at_unix_s: float, live_percent: float | None = None
    ) -> tuple[Decision, Change | None]:
        """The judge's decision, as taken. A promotion in shadow mode (no answer of the
        canary reached a customer yet) goes live at `live_percent`, or is held when that is
        None: going live is then an operator's call."""
        if decision.action == "rollback":
            return decision, self.rollback(decision.reason, now, at_unix_s)
        if decision.action == "promote" and self.shadow:
            if live_percent is None:
                return Decision("hold", self.percent, f"checks held in shadow mode ({decision.reason})"), None
            reason = f"checks held in shadow mode; live at {live_percent:g} %"
            change = self._change(live_percent, False, "rolling", "promote", reason, now, at_unix_s)
            return Decision("promote", live_percent, reason), change
        if decision.action == "promote":
            change = self._change(decision.canary_percent, False, "rolling", "promote", decision.reason, now, at_unix_s)
            return decision, change
        if decision.action == "complete":
            return decision, self._change(100.0, False, "complete", "complete", decision.reason, now, at_unix_s)
        return decision, None

    def new_canary(
        self, version: str | None, start_percent: float, shadow: bool, now: float, at_unix_s: float
    ) -> Change:
        """The canary side now serves `version` (an alias moved; None: the same model as
        stable, nothing to roll out): a rollout of its own from the configured start. The
        old canary's cached answers are dropped."""
        self.epoch += 1
        self.canary_version = version
        if version is None:
            return self._change(0.0, False, "none", "new_canary", "the canary serves the stable model", now, at_unix_s)
        status: Status = "rolling" if start_percent > 0 else "idle"
        return self._change(start_percent, shadow, status, "new_canary", f"canary now {version}", now, at_unix_s)

    def stable_is(self, version: str, now: float, at_unix_s: float) -> Change:
        """The stable side now serves `version`, the canary's: the rollout is over."""
        self.epoch += 1
        self.canary_version = None
        return self._change(0.0, False, "none", "stable", f"stable now {version}", now, at_unix_s)

    def flush_caches(self) -> int:
        self.epoch += 1
        return self.epoch

    def _change(
        self, percent: float, shadow: bool, status: Status, action: Action, reason: str, now: float, at_unix_s: float
    ) -> Change:
        change = Change(round(at_unix_s, 3), action, self.percent, percent, shadow, reason, self.canary_version)
        self.history.append(change)
        self.percent, self.shadow, self.status = percent, shadow, status
        self.since, self.generation = now, self.generation + 1
        return change
