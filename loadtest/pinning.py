"""The engine on CPUs of its own: how a CPU-only box stands in for an accelerator.

On a GPU node the model computes on the device and the graph's Python processes (proxy,
ingress, actors) run on host cores beside it; on two shared cores every hop takes CPU
from the engine instead. `--engine-cpus` gives every vLLM engine-core process these CPUs
and everything else the suite starts (Ray, vLLM's API server, Locust) the rest, for the
peers and the graph alike, so both are measured with the engine on a "device".
"""

from __future__ import annotations

import os
import threading

import psutil

# vLLM names its engine-core process "VLLM::EngineCore" (setproctitle); the kernel's name
# keeps 15 characters, and psutil gives the whole title back where the command line has it.
ENGINE_PROCESS_NAME = "VLLM::EngineCor"


def parse_cpus(text: str) -> set[int]:
    """'1' or '2,3' or '2-3' -> CPU ids; each must be one this process may use, and at least
    one must be left for the rest."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"--engine-cpus {text!r}: expected CPU ids like 1 or 2,3 or 2-3")
        cpus.update(range(int(first), int(last or first) + 1))
    allowed = os.sched_getaffinity(0)
    if not cpus <= allowed:
        raise ValueError(f"--engine-cpus {text!r}: CPUs {sorted(cpus - allowed)} are not among {sorted(allowed)}")
    if not allowed - cpus:
        raise ValueError(f"--engine-cpus {text!r} leaves none of {sorted(allowed)} for the rest")
    return cpus


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` onto `cpus`."""
    for thread in psutil.Process(pid).threads():
        try:
            if os.sched_getaffinity(thread.id) != cpus:
                os.sched_setaffinity(thread.id, cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            continue


class EnginePinner:
    """Keeps this process and its children off `engine_cpus`, and every engine-core process
    (found by name, whoever started it) on them, until stopped."""

    def __init__(self, engine_cpus: set[int], interval_s: float = 0.5, name_prefix: str = ENGINE_PROCESS_NAME):
        self.engine_cpus = engine_cpus
        self.name_prefix = name_prefix
        self.rest = os.sched_getaffinity(0) - engine_cpus
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="engine-pinner", daemon=True)
        self.pinned: set[int] = set()

    def __enter__(self) -> EnginePinner:
        # Children inherit it: Ray (and so every replica), vLLM's API server, Locust.
        os.sched_setaffinity(0, self.rest)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sweep(self) -> None:
        for proc in psutil.process_iter(["name"]):
            if (proc.info["name"] or "").startswith(self.name_prefix):
                try:
                    pin(proc.pid, self.engine_cpus)
                    self.pinned.add(proc.pid)
                except psutil.Error:  # gone between the listing and the pinning
                    continue

    def _loop(self) -> None:
        # Polled, not once: engines start with each deploy and restart on failure, and an
        # engine's worker threads appear after its process does.
        while not self._stop.wait(self._interval_s):
            self.sweep()
