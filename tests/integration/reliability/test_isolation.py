"""Isolation: regular users of three tenants send at a steady rate while, in turn, one
user floods and one tenant floods (hundreds of users, each under its own limit). The
regular users' P99 is compared with the same load without the flood; a cached answer
of one tenant is never served to another.

The flooders are refused by their user or tenant bucket (429 + Retry-After) before any
model work; what a refusal still costs is the HTTP proxy and the ingress, on the same
two cores as everything else.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from bench.common import merged, shipped_args
from tests.integration.conftest import CLASSIFY_KV_FRACTION, running
from tests.integration.reliability.figures import record
from tests.integration.reliability.load import open_loop, ticket_bodies

pytestmark = pytest.mark.reliability

PHASE_S = float(os.environ.get("TICKETSERVE_ISOLATION_PHASE_S", "15"))
REGULAR_PER_S = 24.0
FLOOD_PER_S = 150.0
# Tiers sized for this 2-core machine (the shipped ones are GPU-sized): a user may send
# 10 tickets/s, a tenant 30/s, each with a 2 s burst.
LIMITS = {
    "rate_limit": {
        "tiers": {"anonymous": {"requests_per_s": 5, "burst_window_s": 2},
                  "standard": {"requests_per_s": 10, "burst_window_s": 2}},
        "tenant_limit": {"requests_per_s": 30, "burst_window_s": 2},
    },
    "duplicates": {"max_repeats": 10_000},
}  # fmt: skip


@pytest.fixture(scope="module")
def isolated(ray_serve, default_model_dir):
    args = merged(shipped_args(), {
        "antispam": LIMITS,
        "model": {"engine": {"model_dir": default_model_dir, "gpu_memory_utilization": CLASSIFY_KV_FRACTION}},
    })  # fmt: skip
    with running(ray_serve, "isolation", args) as client:
        yield client, args


def regular_bodies(n: int) -> list[dict]:
    bodies = ticket_bodies(n, seed=7)
    for i, body in enumerate(bodies):
        body["tenant"], body["user_id"] = f"tenant-{i % 3}", f"regular-{i % 24}"
    return bodies


def flood_bodies(n: int, tenant_wide: bool) -> list[dict]:
    bodies = ticket_bodies(n, seed=11)
    for i, body in enumerate(bodies):
        if tenant_wide:  # 300 users of one tenant, each at 0.5 tickets/s: under the user limit
            body["tenant"], body["user_id"] = "tenant-flood", f"member-{i % 300}"
        else:
            body["tenant"], body["user_id"] = "tenant-0", "flooder"
    return bodies


def phase(url: str, timeout_s: float, flood: str | None) -> dict:
    regular = regular_bodies(int(REGULAR_PER_S * PHASE_S) + 10)

    async def run():
        streams = [open_loop(url, regular, [(REGULAR_PER_S, PHASE_S)], timeout_s, max_in_flight=1024)]
        if flood:
            streams.append(open_loop(url, flood_bodies(int(FLOOD_PER_S * PHASE_S) + 10, flood == "tenant"),
                                     [(FLOOD_PER_S, PHASE_S)], timeout_s, max_in_flight=2048))  # fmt: skip
        return await asyncio.gather(*streams)

    results = asyncio.run(run())
    out = {"regular": results[0][0].summary()}
    if flood:
        out["flood"] = results[1][0].summary()
    return out


@pytest.fixture(scope="module")
def floods(isolated) -> dict:
    client, args = isolated
    url = str(client.base_url).rstrip("/")
    timeout_s = args["ingress"]["request_timeout_s"] + 5
    phase(url, timeout_s, None)  # warm-up: caches and the adaptive limits settle
    phases = {}
    for name, flood in (("base", None), ("user_flood", "user"), ("base_again", None), ("tenant_flood", "tenant")):
        phases[name] = phase(url, timeout_s, flood)
    base = max(phases["base"]["regular"]["p99_ok_ms"], phases["base_again"]["regular"]["p99_ok_ms"])
    moved = {name: round(phases[name]["regular"]["p99_ok_ms"] / base - 1, 3) for name in ("user_flood", "tenant_flood")}
    result = {"phases": phases, "p99_moved_vs_worse_base": moved, "phase_s": PHASE_S,
              "regular_per_s": REGULAR_PER_S, "flood_per_s": FLOOD_PER_S}  # fmt: skip
    record("isolation", result)
    return result


def test_floods_are_refused_by_their_own_bucket_and_regular_users_never_are(floods):
    for name in ("user_flood", "tenant_flood"):
        regular, flood = floods["phases"][name]["regular"], floods["phases"][name]["flood"]
        assert 429 not in regular["statuses"] and regular["lost"] == regular["unexpected"] == 0, regular
        # Mostly refused; not an exact bound: the client itself lags at this rate, so the
        # arrivals spread over more seconds than the phase (and the buckets refill).
        assert flood["statuses"].get(429, 0) > 0 and flood["ok"] < flood["refused"], (name, flood)


@pytest.mark.xfail(strict=False, reason="not met on 2 shared cores: refusing a flood still costs the HTTP proxy "
                   "and the ingress CPU the regular tickets need, and admitted flood tickets hold in-flight slots "
                   "of the one admission limit; docs/reliability.md#isolation")  # fmt: skip
def test_a_flooding_user_or_tenant_moves_the_others_p99_by_10_percent_at_most(floods):
    assert all(m <= 0.10 for m in floods["p99_moved_vs_worse_base"].values()), floods["p99_moved_vs_worse_base"]


def test_a_cached_answer_of_one_tenant_is_never_served_to_another(isolated):
    client, _ = isolated
    text = f"my order {uuid.uuid4().hex[:8]} arrived with a cracked screen"
    first = client.post("/v1/classify", json={"text": text, "tenant": "tenant-a", "user_id": "a"}).json()
    again = client.post("/v1/classify", json={"text": text, "tenant": "tenant-a", "user_id": "a"}).json()
    other = client.post("/v1/classify", json={"text": text, "tenant": "tenant-b", "user_id": "b"}).json()
    assert (first["route"], again["route"]) == ("model", "cache")
    assert other["route"] == "model"
