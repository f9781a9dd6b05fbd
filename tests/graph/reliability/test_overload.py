"""Overload: the shipped graph's capacity is measured, then tickets arrive at 1x, 2x and
3x that rate whatever the answers. Every request must end as an answer (200, normal or
degraded) or a refusal with Retry-After (429/503): none lost, none hung past the
client's timeout, no other status.

The load comes through the HAProxy front door (deploy/front_door.py), which forwards at
most `max_forwarded_tickets` at a time and refuses what waited past `queue_timeout_ms`
in C, before Serve's proxy (TICKETSERVE_OVERLOAD_FRONT_DOOR=0, or no haproxy binary:
straight to Serve, where the ingress's admission limit refuses)."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from deploy.front_door import FrontDoorConfig, haproxy_binary
from deploy.front_door import running as running_front_door
from deployments.config import AppConfig
from loadkit.generators import closed_loop, open_loop, ticket_bodies
from loadkit.graph_args import merged, shipped_args
from tests.graph.reliability.figures import record
from tests.harness import HTTP_PORT, LENIENT_ANTISPAM, reliability_engine, running

pytestmark = [pytest.mark.reliability, pytest.mark.drill]

STEP_S = float(os.environ.get("TICKETSERVE_OVERLOAD_STEP_S", "10"))
FRONT_DOOR = os.environ.get("TICKETSERVE_OVERLOAD_FRONT_DOOR", "1") == "1"


@pytest.fixture(scope="module")
def shipped(ray_serve, default_model_dir):
    args = merged(
        shipped_args(),
        {
            "antispam": LENIENT_ANTISPAM,  # one client address sends for every user here
            "model": {"engine": reliability_engine(default_model_dir)},
        },
    )
    with running(ray_serve, "overload", args) as client:
        yield client, args


@pytest.fixture(scope="module")
def door(shipped):
    """The URL the load goes to: the front door's, or Serve's where there is none."""
    client, args = shipped
    try:
        haproxy_binary()
    except FileNotFoundError:
        yield None
        return
    if not FRONT_DOOR:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    front = FrontDoorConfig(listen_port=port, upstream_port=HTTP_PORT, route_prefix="/overload")
    with running_front_door(front, AppConfig.from_args(args)):
        yield f"http://127.0.0.1:{port}/overload", front


@pytest.fixture(scope="module")
def overload_run(shipped, door) -> dict:
    client, args = shipped
    url, front = door or (str(client.base_url).rstrip("/"), None)
    timeout_s = args["ingress"]["request_timeout_s"] + 5
    bodies = ticket_bodies(50_000)
    warm = asyncio.run(closed_loop(url, bodies[40_000:], users=32, seconds=5, timeout_s=timeout_s))
    capacity = asyncio.run(closed_loop(url, bodies[30_000:], users=32, seconds=STEP_S, timeout_s=timeout_s))
    rate = capacity.counts["ok"] / STEP_S
    assert rate > 5, capacity.summary()
    out, steps = asyncio.run(
        open_loop(
            url,
            bodies,
            [(rate, STEP_S), (2 * rate, STEP_S), (3 * rate, STEP_S)],
            timeout_s=timeout_s,
            max_in_flight=4096,
        )
    )
    result = {
        "front_door": front.model_dump(include={"max_forwarded_tickets", "queue_timeout_ms"}) if front else None,
        "capacity_per_s": round(rate, 1),
        "capacity_run": capacity.summary(),
        "warmup": warm.summary(),
        "steps": steps,
        "all": out.summary(),
    }
    record("overload", result)
    return result


def test_every_request_ends_as_an_answer_or_a_refusal_with_retry_after(overload_run):
    summary = overload_run["all"]
    assert (summary["lost"], summary["unexpected"]) == (0, 0), summary
    assert summary["ok"] > 0 and summary["requests"] >= int(6 * overload_run["capacity_per_s"] * STEP_S) - 3


def test_nothing_hangs_at_three_times_capacity(overload_run):
    assert overload_run["all"]["hung"] == 0, overload_run["steps"]
