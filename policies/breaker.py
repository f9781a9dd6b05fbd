"""Circuit breaker for the model path: resilience4j's state machine plus resource triggers.

CLOSED lets calls through and keeps the last `window_calls` outcomes; when at least
`min_calls` are known and the failure or slow-call rate reaches its threshold it opens.
OPEN refuses calls for `open_wait_s`, then HALF_OPEN lets `half_open_probes` through;
if their rates stay under the thresholds it closes, otherwise it opens again.
Independently, resource readings of the protected replicas can force an action:
host CPU hot for a long time → reject new tickets; memory or utilization at the edge →
fall back to the cheap path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Action = Literal["pass", "probe", "fallback", "reject_new"]


class BreakerState(str, Enum):  # noqa: UP042 (str() of a member stays "BreakerState.OPEN" as logged so far)
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


STATE_CODES = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class BreakerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="off: every call passes and nothing is recorded")
    window_calls: int = Field(100, ge=1, description="sliding window: last this many call outcomes")
    min_calls: int = Field(20, ge=1, description="outcomes needed in the window before rates count")
    failure_rate_percent: float = Field(50.0, gt=0, le=100, description="failed share of the window that opens")
    slow_call_ms: float = Field(2000.0, gt=0, description="a call slower than this counts as slow")
    slow_call_rate_percent: float = Field(80.0, gt=0, le=100, description="slow share of the window that opens")
    open_wait_s: float = Field(30.0, gt=0, description="time in OPEN before probing (HALF_OPEN)")
    half_open_probes: int = Field(5, ge=1, description="calls let through in HALF_OPEN to decide")
    cpu_reject_percent: float | None = Field(
        80.0, gt=0, le=100, description="host CPU above this for cpu_reject_after_s → reject_new; null: off"
    )
    cpu_reject_after_s: float = Field(60.0, ge=0, description="how long the CPU must stay hot")
    memory_fallback_percent: float | None = Field(
        90.0, gt=0, le=100, description="accelerator (else host RAM) memory above this → fallback; null: off"
    )
    utilization_fallback_percent: float | None = Field(
        95.0, gt=0, le=100, description="accelerator utilization above this → fallback; null: off"
    )
    resource_stale_s: float = Field(10.0, gt=0, description="a replica's readings older than this are ignored")
    sync_interval_ms: float = Field(100.0, gt=0, description="how often each caller sends outcomes and reads the state")
    call_timeout_ms: float = Field(250.0, gt=0, description="after this without the breaker actor's answer, calls pass")


@dataclass(frozen=True)
class Resources:
    """One replica's readings; None where the device cannot tell."""

    cpu_percent: float | None
    memory_percent: float | None
    utilization_percent: float | None


@dataclass(frozen=True)
class Transition:
    at: float
    source: BreakerState
    target: BreakerState
    reason: str


class CircuitBreaker:
    def __init__(self, config: BreakerConfig, now: float):
        self._config = config
        self.state = BreakerState.CLOSED
        self._window: deque[tuple[bool, bool]] = deque(maxlen=config.window_calls)  # (failed, slow)
        self._changed_at = now
        self._probes_left = 0
        self._probe_outcomes: list[tuple[bool, bool]] = []
        self._resources: dict[str, tuple[float, Resources]] = {}
        self._cpu_hot_since: float | None = None
        self.transitions: deque[Transition] = deque(maxlen=100)
        self.transition_count = 0

    def record(self, failed: bool, duration_ms: float, now: float) -> None:
        c = self._config
        if not c.enabled:
            return
        outcome = (failed, duration_ms > c.slow_call_ms)
        if self.state is BreakerState.CLOSED:
            self._window.append(outcome)
            if len(self._window) >= c.min_calls and (reason := self._tripped(self._window)):
                self._move(BreakerState.OPEN, reason, now)
        elif self.state is BreakerState.HALF_OPEN:
            self._probe_outcomes.append(outcome)
            if len(self._probe_outcomes) >= c.half_open_probes:
                if reason := self._tripped(self._probe_outcomes):
                    self._move(BreakerState.OPEN, f"probes: {reason}", now)
                else:
                    self._move(BreakerState.CLOSED, "probes healthy", now)
        # Outcomes arriving while OPEN are calls admitted before it opened: no evidence either way.

    def acquire(self, now: float) -> Action:
        """What to do with one new call; in HALF_OPEN this takes one probe permit."""
        action = self.view(now)
        if action == "probe":
            if self._probes_left <= 0:
                return "fallback"
            self._probes_left -= 1
        return action

    def view(self, now: float) -> Action:
        """The action for new calls without taking a probe permit (what callers cache)."""
        c = self._config
        if not c.enabled:
            return "pass"
        if self.state is BreakerState.OPEN and now - self._changed_at >= c.open_wait_s:
            self._move(BreakerState.HALF_OPEN, f"waited {c.open_wait_s:g}s", now)
        elif self.state is BreakerState.HALF_OPEN and now - self._changed_at >= c.open_wait_s:
            # Probes whose outcome never came (caller lost) must not keep it half-open forever.
            self._move(BreakerState.HALF_OPEN, "probes lost", now)
        resource_action = self._resource_action(now)
        if resource_action:
            return resource_action
        return {BreakerState.CLOSED: "pass", BreakerState.OPEN: "fallback", BreakerState.HALF_OPEN: "probe"}[self.state]

    def observe_resources(self, source: str, resources: Resources, now: float) -> None:
        self._resources[source] = (now, resources)

    def _resource_action(self, now: float) -> Action | None:
        c = self._config
        fresh = [r for at, r in self._resources.values() if now - at <= c.resource_stale_s]
        if c.memory_fallback_percent is not None and any(
            r.memory_percent is not None and r.memory_percent > c.memory_fallback_percent for r in fresh
        ):
            return "fallback"
        if c.utilization_fallback_percent is not None and any(
            r.utilization_percent is not None and r.utilization_percent > c.utilization_fallback_percent for r in fresh
        ):
            return "fallback"
        hot = c.cpu_reject_percent is not None and any(
            r.cpu_percent is not None and r.cpu_percent > c.cpu_reject_percent for r in fresh
        )
        if not hot:
            self._cpu_hot_since = None
            return None
        if self._cpu_hot_since is None:
            self._cpu_hot_since = now
        return "reject_new" if now - self._cpu_hot_since >= c.cpu_reject_after_s else None

    def _tripped(self, outcomes) -> str | None:
        c = self._config
        n = len(outcomes)
        if n == 0:
            return None
        failed = 100.0 * sum(f for f, _ in outcomes) / n
        slow = 100.0 * sum(s for _, s in outcomes) / n
        if failed >= c.failure_rate_percent:
            return f"failure rate {failed:.0f}%"
        if slow >= c.slow_call_rate_percent:
            return f"slow-call rate {slow:.0f}%"
        return None

    def _move(self, target: BreakerState, reason: str, now: float) -> None:
        self.transitions.append(Transition(now, self.state, target, reason))
        self.transition_count += 1
        self.state = target
        self._window.clear()
        self._probe_outcomes = []
        self._changed_at = now
        if target is BreakerState.HALF_OPEN:
            self._probes_left = self._config.half_open_probes
