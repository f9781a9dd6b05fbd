import threading
import time

from deployments.metrics.held_gauge import HeldGauge


class Recorder:
    def __init__(self):
        self.calls: list[tuple[float, dict[str, str]]] = []
        self.lock = threading.Lock()

    def set(self, value, tags=None):
        with self.lock:
            self.calls.append((value, tags or {}))

    def count(self, value, tags=None) -> int:
        with self.lock:
            return self.calls.count((value, tags or {}))


def wait_for(condition, timeout_s=5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_a_value_set_once_keeps_being_reported_per_tag_set():
    recorder = Recorder()
    gauge = HeldGauge("model_info", "test", ("model_version",), refresh_s=0.01, gauge=recorder)
    gauge.set(1, tags={"model_version": "a"})
    gauge.set(1, tags={"model_version": "b"})
    assert wait_for(lambda: recorder.count(1, {"model_version": "a"}) >= 3)
    assert wait_for(lambda: recorder.count(1, {"model_version": "b"}) >= 3)


def test_the_latest_value_replaces_the_held_one():
    recorder = Recorder()
    gauge = HeldGauge("canary_percent", "test", refresh_s=0.01, gauge=recorder)
    gauge.set(5)
    gauge.set(50)
    assert wait_for(lambda: recorder.count(50) >= 3)
    held_5 = recorder.count(5)
    time.sleep(0.1)
    assert recorder.count(5) == held_5, "a replaced value is still reported"
