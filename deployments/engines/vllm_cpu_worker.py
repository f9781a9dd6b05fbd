"""vLLM's CPU worker with a short busy-wait on the engine's message queue.

vLLM's worker process reads each engine step from a shared-memory queue and, after every
read, spins (sched_yield) for a hard-coded 1 s before it sleeps on a socket. At any
traffic above one ticket a second it never sleeps: measured here at 2 model tickets/s,
the worker took 92 % of a core, half of this 2-core machine, from the HTTP proxy and the
ingress. Upstream knows (vllm#19036; #52814 and #51950 would make it configurable; 2 ms
is what downstream CPU/SoC builds patch in). vLLM spawns this worker in a process of its
own and imports the worker class by name before it builds the queue, so that import is
where the window is set: `EngineConfig.ipc_busy_wait_ms`, passed in the environment.
"""

from __future__ import annotations

import os

from vllm.distributed.device_communicators import shm_broadcast
from vllm.v1.worker.cpu_worker import CPUWorker

BUSY_WAIT_ENV = "TICKETSERVE_VLLM_BUSY_WAIT_MS"


def _with_busy_wait(init, busy_wait_s: float):
    def __init__(self, is_reader, context, notify_address, busy_loop_s=busy_wait_s):
        init(self, is_reader, context, notify_address, busy_loop_s)

    return __init__


if BUSY_WAIT_ENV in os.environ:
    shm_broadcast.SpinCondition.__init__ = _with_busy_wait(
        shm_broadcast.SpinCondition.__init__, float(os.environ[BUSY_WAIT_ENV]) / 1000
    )


class ShortSpinCPUWorker(CPUWorker):
    """CPUWorker; importing this module is what shortens the wait."""
