"""The model path's circuit breaker, one actor shared by every caller (their local view of
it: deployments/callers/breaker_view.py).

Callers do not ask the actor per ticket: each keeps the last action it was told and
sends its call outcomes in batches, at most one sync in flight and one per
`sync_interval_ms`. Only in HALF_OPEN does a ticket ask the actor itself, for one of
the few probe permits. Model replicas report their resource readings here too.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable

from ray.serve.metrics import Counter

from deployments.metrics.held_gauge import HeldGauge
from policies.breaker import STATE_CODES, Action, BreakerConfig, CircuitBreaker, Resources

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "Breaker",
    "num_replicas": 1,
    "max_ongoing_requests": 4096,
    "ray_actor_options": {"num_cpus": 0},
}


class Breaker:
    def __init__(self, config: BreakerConfig, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._breaker = CircuitBreaker(config, clock())
        self._published = self._breaker.transition_count
        self._state = HeldGauge("breaker_state", description="Model-path breaker: 0 closed, 1 half-open, 2 open.")
        self._transitions = Counter(
            "breaker_transitions_total", description="Breaker state changes, by new state.", tag_keys=("state",)
        )
        self._state.set(0)

    def sync(self, outcomes: list[tuple[bool, float]]) -> Action:
        """(failed, duration_ms) of calls since the caller's last sync; answers the current action."""
        now = self._clock()
        for failed, duration_ms in outcomes:
            self._breaker.record(failed, duration_ms, now)
        action = self._breaker.view(now)
        self._publish()
        return action

    def acquire(self) -> Action:
        action = self._breaker.acquire(self._clock())
        self._publish()
        return action

    def report_resources(self, source: str, resources: Resources) -> None:
        self._breaker.observe_resources(source, resources, self._clock())

    def state(self) -> dict:
        now = self._clock()
        action = self._breaker.view(now)
        self._publish()
        return {
            "state": self._breaker.state.value,
            "action": action,
            "transitions": [
                {"at_s_ago": round(now - t.at, 3), "from": t.source.value, "to": t.target.value, "reason": t.reason}
                for t in self._breaker.transitions
            ],
        }

    def _publish(self) -> None:
        """Logs and counts the transitions since the last call (usually none)."""
        history = self._breaker.transitions
        fresh = min(self._breaker.transition_count - self._published, len(history))
        for t in itertools.islice(history, len(history) - fresh, None):
            logger.info("breaker %s -> %s: %s", t.source.value, t.target.value, t.reason)
            self._transitions.inc(tags={"state": t.target.value})
        self._published = self._breaker.transition_count
        self._state.set(STATE_CODES[self._breaker.state])

    async def ping(self) -> str:
        return "ok"
