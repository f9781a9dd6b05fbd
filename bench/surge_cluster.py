"""A simulated GPU cluster on this machine, for bench.surge: Ray's fake multi-node
provider (`ray.autoscaler._private.fake_multi_node`, what `ray.cluster_utils.
AutoscalingCluster` starts) with GPU worker nodes that the cluster autoscaler adds and
removes as local processes, each appearing `node_start_s` after it is asked for (a cloud
VM's boot and image pull).

AutoscalingCluster itself reads the provider's `example.yaml`, which Ray's wheel does not
ship, so the same `ray start --head --autoscaling-config` is run here with a config of
our own; the provider is the fake one, loaded as an external module for its delay.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider

from deployments.ray_env import cluster_env

GPU_NODE = "gpu_node"
HEAD_NODE = "ray.head.default"


class SlowStartProvider(FakeMultiNodeProvider):
    """The fake provider, whose nodes take `node_start_s` (provider config) to appear. The
    autoscaler launches from threads of its own and counts a launch as pending until this
    returns, so the wait neither blocks it nor makes it ask twice."""

    def create_node_with_resources_and_labels(self, node_config, tags, count, resources, labels):
        time.sleep(float(self.provider_config.get("node_start_s", 0)))
        super().create_node_with_resources_and_labels(node_config, tags, count, resources, labels)


@dataclass(frozen=True)
class FakeGpuCluster:
    head_cpus: int = 2
    max_gpu_nodes: int = 8
    min_gpu_nodes: int = 0  # started with the cluster and never removed as idle
    node_start_s: float = 20.0
    idle_timeout_s: float = 30.0  # an idle GPU node is removed after this
    object_store_bytes: int = 100 * 1024**2  # per GPU node: dozens of them share this machine's memory
    node_niceness: int = 19  # of the simulated nodes' processes
    haproxy: bool = True  # Serve's HAProxy mode (deployments.ray_env), as served; else its Python proxy

    def config(self) -> dict:
        node = {
            "resources": {"CPU": 0, "GPU": 1, "object_store_memory": self.object_store_bytes},
            "node_config": {},
            "min_workers": self.min_gpu_nodes,
            "max_workers": self.max_gpu_nodes,
        }
        return {
            "cluster_name": "surge",
            "max_workers": self.max_gpu_nodes,
            "provider": {
                "type": "external",
                "module": f"{__name__}.SlowStartProvider",
                "use_node_id_as_ip": True,
                "disable_node_updaters": True,
                "disable_launch_config_check": True,
                "launch_multiple": True,  # one launch of N nodes makes N, all after one delay
                "node_start_s": self.node_start_s,
            },
            "available_node_types": {
                HEAD_NODE: {"resources": {"CPU": self.head_cpus}, "node_config": {}, "max_workers": 0},
                GPU_NODE: node,
            },
            "head_node_type": HEAD_NODE,
            "auth": {},
            "upscaling_speed": 1.0,
            "idle_timeout_minutes": self.idle_timeout_s / 60,
            "docker": {},
            "initialization_commands": [],
            "setup_commands": [],
            "head_setup_commands": [],
            "worker_setup_commands": [],
            "head_start_ray_commands": [],
            "worker_start_ray_commands": [],
            "file_mounts": {},
            "cluster_synced_files": [],
            "file_mounts_sync_continuously": False,
            "rsync_exclude": [],
            "rsync_filter": [],
        }

    def start(self, root: Path, ray_cli: Path) -> None:
        """`ray start --head` with the autoscaler on this config, in the project's cluster
        environment (deployments.ray_env; `root` on PYTHONPATH, where the autoscaler
        imports SlowStartProvider from)."""
        self.stop(ray_cli)
        fd, path = tempfile.mkstemp(suffix=".json", prefix="surge-cluster-")
        with os.fdopen(fd, "w") as f:
            json.dump(self.config(), f)
        # No token auth (which `ray start` turns on where a token file exists): the nodes the
        # autoscaler starts, and the benchmark's driver, join without one.
        env = {
            **cluster_env(root, haproxy=self.haproxy),
            "RAY_FAKE_CLUSTER": "1",
            "AUTOSCALER_UPDATE_INTERVAL_S": "1",
            "RAY_AUTH_MODE": "disabled",
        }
        cmd = [str(ray_cli), "start", "--head", f"--autoscaling-config={path}", f"--num-cpus={self.head_cpus}"]
        # No dashboard: its head modules poll every node, CPU the serving graph needs more.
        cmd += ["--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats"]
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        # The simulated nodes (raylet, agents, then the replicas' processes) are the
        # autoscaler's children and take its niceness: their start-up shares these two
        # cores with the serving graph, where a real node brings CPUs of its own
        # (bench.surge sets the graph's own processes to 0). Niceness is per thread, and
        # the nodes start from the autoscaler's launcher threads: every thread is set.
        for proc in psutil.process_iter(["cmdline"]):
            if any("autoscaler/_private/monitor.py" in part for part in proc.info["cmdline"] or ()):
                for thread in proc.threads():
                    os.setpriority(os.PRIO_PROCESS, thread.id, self.node_niceness)

    @staticmethod
    def stop(ray_cli: Path) -> None:
        subprocess.run([str(ray_cli), "stop", "--force"], check=True, capture_output=True)


def gpu_nodes_alive() -> int:
    """GPU nodes up now (the caller is connected to the cluster)."""
    import ray

    return sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU", 0) > 0)
