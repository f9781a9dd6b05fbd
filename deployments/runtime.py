"""Environment the Ray cluster's processes must start with (`ray start`, `ray.init`).

Serve reads these when its controller, proxy and replicas start, so they belong to the
cluster, not to the application: scripts/serve.sh exports the same for `ray start`.
"""

from __future__ import annotations

import os

RAY_ENV = {
    # Serve's throughput mode (Ray >= 2.56): gRPC between deployments instead of actor
    # calls through the object store, router and user code on the replica's own event
    # loop, buffered request logs. With five hops per ticket it took the model path
    # from 45 to 66 req/s on 2 cores (docs/benchmarks.md).
    "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
}


def apply_ray_env() -> None:
    """Call before `ray.init` starts a local cluster; values already set win."""
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
