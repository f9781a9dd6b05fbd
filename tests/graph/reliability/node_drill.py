"""Node loss drill: a two-node Ray cluster on this machine (`ray start --head` and a
second `ray start --address` with its own resources and temp folder), the shipped graph
with two ingress and two model replicas spread over both nodes, a closed-loop load, and
the second node killed (every process of it, SIGKILL) in the middle of the run.

    python -m tests.graph.reliability.node_drill [--out FILE] [--seconds 45] [--kill-at-s 12]

Prints and writes (--out) the answers by kind, when the graph answered /healthz 200
again, and where the replicas run afterwards. Runs its own cluster on free ports, so it
can run beside another Ray on the machine; it never calls `ray stop`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from deployments.ray_env import RAY_ENV, cluster_env
from loadkit.generators import Outcomes, closed_loop, ticket_bodies
from loadkit.graph_args import merged, shipped_args
from models.build import DEFAULT_OUT, ROOT
from tests.harness import graph_config, reliability_engine

SPREAD = {"num_replicas": 2, "max_replicas_per_node": 1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            ["ray", "start", "--block", "--disable-usage-stats", *args],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_head(env: dict, tmp: Path, extra: list[str]) -> tuple[subprocess.Popen, str]:
    """A head node on free ports (2 CPUs, no dashboard, its own temp folder under `tmp`),
    once `ray status` answers: the process and its GCS address."""
    gcs, client_port = free_port(), free_port()
    head = start_node(
        [
            "--head",
            "--port",
            str(gcs),
            "--ray-client-server-port",
            str(client_port),
            "--include-dashboard",
            "false",
            "--num-cpus",
            "2",
            *extra,
            "--temp-dir",
            str(tmp / "head"),
        ],
        env,
        tmp / "head.log",
    )
    address = f"127.0.0.1:{gcs}"
    deadline = time.monotonic() + 60
    while subprocess.run(["ray", "status", "--address", address], env=env, capture_output=True).returncode:
        if time.monotonic() > deadline or head.poll() is not None:
            kill_tree(head)
            raise RuntimeError((tmp / "head.log").read_text()[-2000:])
        time.sleep(1)
    return head, address


def kill_tree(process: subprocess.Popen) -> int:
    """SIGKILL the node's `ray start` and everything under it: the node is gone."""
    try:
        root = psutil.Process(process.pid)
        victims = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for p in victims:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    return len(victims)


def replicas_by_node(app: str) -> dict[str, dict[str, int]]:
    import ray

    out: dict[str, dict[str, int]] = {}
    nodes = {n["NodeID"]: ("head" if n["Resources"].get("head_node") else "second") for n in ray.nodes() if n["Alive"]}
    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(f"SERVE_REPLICA::{app}#")
    ]
    asked = {}
    for name in names:
        try:
            handle = ray.get_actor(name, namespace="serve")
            asked[name] = handle.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
        except Exception:
            pass
    # One wait for all: a replica of the killed node never answers, and each waited
    # 5 s of its own in turn before.
    answered, _ = ray.wait(list(asked.values()), num_returns=len(asked), timeout=5) if asked else ([], [])
    for name in names:
        node = "unreachable"
        if name in asked and asked[name] in answered:
            try:
                node = ray.get(asked[name])
            except Exception:
                pass
        where = nodes.get(node, "gone" if node != "unreachable" else node)
        deployment = name.split("#")[1]
        out.setdefault(deployment, {}).setdefault(where, 0)
        out[deployment][where] += 1
    return out


def run(seconds: float, kill_at_s: float, users: int) -> dict:
    env = cluster_env(ROOT)
    # Read when ray is imported: the driver speaks to the cluster the way its nodes do.
    os.environ.update({k: v for k, v in env.items() if k in (*RAY_ENV, "RAY_AUTH_MODE") and k not in os.environ})
    import ray
    from ray import serve

    from serve_app import bind_graph

    http = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="tsdrill"))
    head, address = start_head(env, tmp, ["--resources", '{"head_node": 2}'])
    joined_by = time.monotonic() + 60
    second = None
    try:
        second = start_node(
            ["--address", address, "--num-cpus", "2", "--resources", '{"second_node": 2}'], env, tmp / "second.log"
        )
        ray.init(address=address, log_to_driver=False)
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            assert time.monotonic() < joined_by, "the second node did not join"
            time.sleep(1)
        serve.start(http_options={"host": "127.0.0.1", "port": http})
        args = merged(
            shipped_args(),
            {
                "antispam": {
                    "rate_limit": {
                        "tiers": {"anonymous": {"requests_per_s": 10_000}, "standard": {"requests_per_s": 10_000}}
                    },
                    "duplicates": {"max_repeats": 10_000},
                },
                "model": {"engine": reliability_engine(str(DEFAULT_OUT))},
            },
        )
        serve.run(
            bind_graph(graph_config("drill", args, tmp), {"Ingress": SPREAD, "ModelReplica": SPREAD}),
            name="drill",
            route_prefix="/",
        )
        url = f"http://127.0.0.1:{http}"
        before = replicas_by_node("drill")
        out, began, marks = Outcomes(), time.perf_counter(), {}

        def chaos():
            time.sleep(kill_at_s)
            marks["killed_at_s"] = time.perf_counter() - began
            marks["processes_killed"] = kill_tree(second)
            unhealthy_seen = False
            while time.perf_counter() - began < seconds + 120:
                try:
                    ok = httpx.get(f"{url}/healthz", timeout=5).status_code == 200
                except httpx.HTTPError:
                    ok = False
                unhealthy_seen |= not ok
                if ok and "healthz_at_s" not in marks and time.perf_counter() - began > kill_at_s + 1:
                    marks["healthz_at_s"] = time.perf_counter() - began
                    marks["unhealthy_seen"] = unhealthy_seen
                    return
                time.sleep(0.5)

        watcher = threading.Thread(target=chaos)
        watcher.start()
        asyncio.run(
            closed_loop(
                url, ticket_bodies(20_000, seed=3), users=users, seconds=seconds, timeout_s=35, out=out, began=began
            )
        )
        watcher.join()
        killed = marks["killed_at_s"]
        after_kill = [(at, kind) for at, kind in out.timeline if at >= killed]
        failures = [at for at, kind in out.timeline if kind in ("unexpected", "lost", "hung")]
        first_ok = next((at for at, kind in sorted(after_kill) if kind == "ok"), None)
        return {
            **out.summary(),
            "users": users,
            "seconds": seconds,
            "killed_at_s": round(killed, 1),
            "processes_killed": marks["processes_killed"],
            "healthz_ok_after_s": round(marks["healthz_at_s"] - killed, 1) if "healthz_at_s" in marks else None,
            "first_failure_after_kill_s": round(min(failures) - killed, 2) if failures else None,
            "last_failure_after_kill_s": round(max(failures) - killed, 2) if failures else None,
            "first_answer_after_kill_s": round(first_ok - killed, 2) if first_ok is not None else None,
            "replicas_before": before,
            "replicas_after": replicas_by_node("drill"),
        }
    finally:
        try:
            # No serve.shutdown(): it drains every replica, and the cluster is killed next.
            ray.shutdown()
        except Exception:
            pass
        if second is not None:
            kill_tree(second)
        kill_tree(head)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="JSON file for the figures")
    p.add_argument("--seconds", type=float, default=45, help="load run length")
    p.add_argument("--kill-at-s", type=float, default=12, help="when the second node is killed")
    p.add_argument("--users", type=int, default=12, help="closed-loop clients")
    a = p.parse_args(argv)
    result = run(a.seconds, a.kill_at_s, a.users)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
