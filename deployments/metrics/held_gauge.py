"""A Serve gauge that keeps reporting its last values.

Ray's metrics agent drops a gauge series two export intervals (20 s by default) after its
last `set()` (`ray/_private/telemetry/open_telemetry_metric_recorder.py`, the gauge TTL).
A value set once or only on change (the model version, a batch knob at rest, the canary
share, open review items) would vanish from Prometheus within seconds of being set, and a
scrape missed in that window (a busy node, a restarted Prometheus) never sees it at all."""

from __future__ import annotations

import threading
import time
from typing import Protocol

from ray.serve.metrics import Gauge

from deployments.metrics import metric_tags

# Well inside the agent's 20 s TTL (2 × the default 10 s export interval).
REFRESH_S = 5.0


class SettableGauge(Protocol):
    def set(self, value: float, tags: dict[str, str] | None = None) -> None: ...


class HeldGauge:
    def __init__(
        self,
        name: str,
        description: str,
        tag_keys: tuple[str, ...] = (),
        refresh_s: float = REFRESH_S,
        gauge: SettableGauge | None = None,
    ):
        """`gauge` replaces Serve's own (tests)."""
        self._gauge = (
            gauge
            if gauge is not None
            else Gauge(name, description=description, tag_keys=metric_tags.tag_keys(*tag_keys))
        )
        self._refresh_s = refresh_s
        self._last: dict[tuple[tuple[str, str], ...], tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        with self._lock:
            tags = tags or {}
            self._last[tuple(sorted(tags.items()))] = (value, tags)
            if self._thread is None:
                # A thread, not a task: gauges are set from sync constructors and handlers too.
                self._thread = threading.Thread(target=self._hold, name="held-gauge", daemon=True)
                self._thread.start()
            self._gauge.set(value, tags=tags)

    def _hold(self) -> None:
        while True:
            time.sleep(self._refresh_s)
            # Under the lock: a refresh between a new set() and its own report would put
            # the old value back for a whole interval (a breaker opening reported as closed).
            with self._lock:
                for value, tags in self._last.values():
                    self._gauge.set(value, tags=tags)
