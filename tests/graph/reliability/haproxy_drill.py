"""Serve's HAProxy mode (the served default: deployments/ray_env.py HAPROXY_ENV) on a Ray
head of its own: the graph on the fake engine, every route and every error asked once
through HAProxy, and how long `serve.delete` takes there.

    python -m tests.graph.reliability.haproxy_drill [--out FILE] [--no-delete-timing]

Prints and writes (--out) each case's status, content type and error code. Runs its own
head on free ports beside any other Ray on the machine, and never calls `ray stop`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx

from deployments.ray_env import HAPROXY_ENV, RAY_ENV, cluster_env
from models.build import DEFAULT_OUT, ROOT
from tests.graph.reliability.node_drill import free_port, kill_tree, start_head
from tests.harness import LENIENT_ANTISPAM, graph_config, long_ticket

TOKEN = "drill-admin-token"
# (name, method, path, body: dict for JSON, bytes as sent, None for no body)
CASES = [
    ("classify", "POST", "/v1/classify", {"text": "my parcel arrived broken, the box was crushed"}),
    ("batch", "POST", "/v1/classify/batch", {"tickets": [{"text": "where is my order"}, {"text": 12}]}),
    ("labels", "GET", "/v1/labels", None),
    ("healthz", "GET", "/healthz", None),
    ("unknown_path", "GET", "/v1/nothing-here", None),
    ("wrong_method", "GET", "/v1/classify", None),
    ("invalid_json", "POST", "/v1/classify", b'{"text": "oops"'),
    ("invalid_field", "POST", "/v1/classify", {"text": 12}),
    ("too_long", "POST", "/v1/classify", {"text": long_ticket(12_000) + " more"}),
    ("admin_without_token", "GET", "/admin/state", None),
]


def run(time_delete: bool = True) -> dict:
    env = cluster_env(ROOT, haproxy=True)
    # Serve's HAProxy binds fixed stats and metrics ports (8404, 9101) on every host: an
    # HAProxy-mode Serve already on this machine (scripts/serve.sh's) holds them.
    for key in ("RAY_SERVE_HAPROXY_STATS_PORT", "RAY_SERVE_HAPROXY_METRICS_PORT"):
        env.setdefault(key, str(free_port()))
    # Read when ray is imported: the driver speaks to the cluster the way its node does.
    keys = (*RAY_ENV, *HAPROXY_ENV, "RAY_AUTH_MODE")
    os.environ.update({k: v for k, v in env.items() if k in keys})
    import ray
    from ray import serve

    from serve_app import bind_graph

    http = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="tshaproxy"))
    head, address = start_head(env, tmp, [])
    try:
        ray.init(address=address, log_to_driver=False)
        serve.start(http_options={"host": "127.0.0.1", "port": http})
        args = {
            "antispam": LENIENT_ANTISPAM,
            "model": {"engine": {"mode": "fake", "model_dir": str(DEFAULT_OUT)}},
            "admin": {"token": TOKEN},
        }
        serve.run(bind_graph(graph_config("haproxy", args, tmp)), name="haproxy", route_prefix="/")
        url = f"http://127.0.0.1:{http}"
        with httpx.Client(base_url=url, timeout=30) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            cases = {}
            for name, method, path, body in CASES:
                r = client.request(
                    method,
                    path,
                    json=body if isinstance(body, dict) else None,
                    content=body if isinstance(body, bytes) else None,
                )
                try:
                    answer = r.json()
                except ValueError:
                    answer = None
                cases[name] = {
                    "status": r.status_code,
                    "content_type": r.headers.get("content-type", ""),
                    "json": answer is not None,
                    "code": (answer or {}).get("error", {}).get("code") if isinstance(answer, dict) else None,
                }
        if not time_delete:
            return {"cases": cases, "serve_delete_s": None}
        started = time.monotonic()
        serve.delete("haproxy")
        return {"cases": cases, "serve_delete_s": round(time.monotonic() - started, 1)}
    finally:
        try:
            # Serve's shutdown drains the ingress as long as a delete does; the head dies anyway.
            if time_delete:
                serve.shutdown()
            ray.shutdown()
        except Exception:
            pass
        kill_tree(head)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="JSON file for the results")
    p.add_argument(
        "--no-delete-timing",
        action="store_true",
        help="skip timing `serve delete` (~30 s: the ingress's direct-ingress drain); the head is killed anyway",
    )
    a = p.parse_args(argv)
    text = json.dumps(run(time_delete=not a.no_delete_timing), indent=2)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
