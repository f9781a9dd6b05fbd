"""Bounded load, every request's end classified: one closed-loop and one open-loop
generator on aiohttp, for the benchmarks and the reliability tests.

An answer is `ok` (200), `refused` (429 or 503 with Retry-After: the contract's way of
saying "not now"), `unexpected` (any other status, or a refusal without Retry-After),
`lost` (the connection failed: no answer at all) or `hung` (no answer within the
client's timeout, which is longer than the service's own request budget).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp

from loadkit.mix import TicketMix
from loadkit.stats import percentile


def ticket_bodies(n: int, seed: int = 0, user_prefix: str = "user") -> list[dict]:
    """The load-test mix (templated, regular and complex tickets; repeats included)."""
    rng = random.Random(seed)
    mix = TicketMix.load()
    return [
        {"text": mix.draw(rng).text, "ticket_id": f"{user_prefix}-t{i}", "user_id": f"{user_prefix}-{i % 64}"}
        for i in range(n)
    ]


KINDS = ("ok", "refused", "unexpected", "lost", "hung")


def _json(text: str) -> dict:
    try:
        answer = json.loads(text)
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


@dataclass
class Outcomes:
    counts: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    ok_ms: list[float] = field(default_factory=list)
    ok_at_s: list[float] = field(default_factory=list)  # when each of ok_ms was sent, since the start
    model_ms: list[float] = field(default_factory=list)  # ok answers that are not degraded
    service_ms: list[float] = field(default_factory=list)  # ok answers' own latency_ms: time inside the service
    refused_ms: list[float] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)  # a few unexpected answers, to read
    timeline: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, kind)
    versions: list[tuple[float, str]] = field(default_factory=list)  # (sent at, model_version) of ok answers
    routes: list[str] = field(default_factory=list)  # the route of each of ok_ms

    def add(self, kind: str, at_s: float, status: int | None = None, ms: float | None = None, note: str = "") -> None:
        """`note`: the body of an answer (read for degraded and latency_ms) or a refusal."""
        self.counts[kind] += 1
        self.timeline.append((round(at_s, 3), kind))
        if status is not None:
            self.statuses[status] += 1
        if kind == "ok" and ms is not None:
            self.ok_ms.append(ms)
            self.ok_at_s.append(round(at_s, 3))
            answer = _json(note)
            self.versions.append((round(at_s, 3), str(answer.get("model_version"))))
            self.routes.append(str(answer.get("route")))
            if answer.get("degraded"):
                self.counts["degraded"] += 1
            else:
                self.model_ms.append(ms)
            if isinstance(answer.get("latency_ms"), (int, float)):
                self.service_ms.append(answer["latency_ms"])
        if kind == "refused" and ms is not None:
            self.refused_ms.append(ms)
        if kind in ("unexpected", "lost", "refused") and len(self.samples) < 20:
            self.samples.append(f"{kind} {status}: {note[:300]}")

    def merge(self, other: Outcomes) -> None:
        self.counts.update(other.counts)
        self.statuses.update(other.statuses)
        self.ok_ms += other.ok_ms
        self.ok_at_s += other.ok_at_s
        self.model_ms += other.model_ms
        self.service_ms += other.service_ms
        self.refused_ms += other.refused_ms
        self.samples += other.samples[: max(0, 20 - len(self.samples))]
        self.timeline += other.timeline
        self.versions += other.versions
        self.routes += other.routes

    @property
    def total(self) -> int:
        return sum(self.counts[k] for k in KINDS)

    def p(self, q: float) -> float | None:
        return percentile(self.ok_ms, 100 * q, 1)

    def summary(self) -> dict:
        failed = self.counts["unexpected"] + self.counts["lost"] + self.counts["hung"]
        return {
            "requests": self.total,
            **{k: self.counts[k] for k in KINDS},
            "degraded": self.counts["degraded"],
            "error_rate_percent": round(100 * failed / max(1, self.total), 3),
            "not_answered_percent": round(100 * (self.total - self.counts["ok"]) / max(1, self.total), 3),
            "p50_ok_ms": self.p(0.5),
            "p99_ok_ms": self.p(0.99),
            "statuses": dict(self.statuses),
            "samples": self.samples,
        }


CLASSIFY = "v1/classify"


async def send(
    client: aiohttp.ClientSession,
    body: dict,
    out: Outcomes,
    began: float,
    headers: dict | None = None,
    path: str = CLASSIFY,
) -> float:
    """Sends one ticket and files its end; returns the Retry-After of a refusal (else 0)."""
    start = time.perf_counter()
    try:
        async with client.post(path, json=body, headers=headers or {}) as r:
            text = await r.text()
    except TimeoutError:  # the session's total timeout: the whole wait, connect included
        out.add("hung", start - began)
        return 0.0
    except aiohttp.ClientError as e:
        out.add("lost", start - began, note=type(e).__name__)
        return 0.0
    ms = (time.perf_counter() - start) * 1000
    if r.status == 200:
        out.add("ok", start - began, 200, ms, note=text)
    elif r.status in (429, 503) and r.headers.get("retry-after"):
        out.add("refused", start - began, r.status, ms, note=text)
        return float(r.headers["retry-after"])
    else:
        out.add("unexpected", start - began, r.status, note=text)
    return 0.0


def client(base_url: str, timeout_s: float, connections: int) -> aiohttp.ClientSession:
    # aiohttp, not httpx: the generator shares the two cores with the graph, and httpx
    # spends several times the CPU per request (at 250/s its own loop fell seconds behind).
    return aiohttp.ClientSession(
        base_url=base_url.rstrip("/") + "/",  # the app's route prefix stays: paths are joined to it
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        connector=aiohttp.TCPConnector(limit=connections),
    )


async def closed_loop(
    base_url: str,
    bodies: list[dict],
    users: int,
    seconds: float,
    timeout_s: float,
    out: Outcomes | None = None,
    began: float | None = None,
    path: str = CLASSIFY,
    max_requests: int | None = None,
) -> Outcomes:
    """`users` clients, each sending its next ticket when the last is answered, or after
    the Retry-After of a refusal, as a well-behaved client does; `path` under `base_url`;
    at most `max_requests` in all."""
    out = out or Outcomes()
    began = began or time.perf_counter()
    deadline = time.perf_counter() + seconds
    sent = 0
    async with client(base_url, timeout_s, users) as c:

        async def user(k: int) -> None:
            nonlocal sent
            i = k
            while time.perf_counter() < deadline and (max_requests is None or sent < max_requests):
                sent += 1
                if wait_s := await send(c, bodies[i % len(bodies)], out, began, path=path):
                    await asyncio.sleep(min(wait_s, max(0.0, deadline - time.perf_counter())))
                i += users

        await asyncio.gather(*(user(k) for k in range(users)))
    return out


@dataclass
class Step:
    """One rate of an open-loop run and what came of it."""

    offered_per_s: float
    seconds: float
    outcomes: Outcomes
    client_loop_lag_max_ms: float  # the generator's own loop falling behind, not the service's delay

    def summary(self) -> dict:
        return {
            "offered_per_s": round(self.offered_per_s, 1),
            "seconds": self.seconds,
            **self.outcomes.summary(),
            "answered_per_s": round(self.outcomes.counts["ok"] / self.seconds, 1),
            "client_loop_lag_max_ms": round(self.client_loop_lag_max_ms, 1),
        }


async def open_loop_steps(
    base_url: str,
    bodies: list[dict],
    steps: list[tuple[float, float]],
    timeout_s: float,
    max_in_flight: int,
    raw: bool = False,
    stop: threading.Event | None = None,
) -> list[Step]:
    """Arrivals at `rate` per second for `seconds`, step after step, whatever the answers
    (a capped number in flight: past it an arrival counts as lost on the client side and
    is reported as such). `raw`: bare HTTP/1.1 instead of aiohttp (raw_sender), for a
    flood beside a measured stream. `stop`, once set (from another thread), ends the
    arrivals early: a run as long as something else takes, the steps being its cap."""
    stop = stop or threading.Event()
    done: list[Step] = []
    began = time.perf_counter()
    tasks: set[asyncio.Task] = set()
    lags_ms: list[float] = []

    async def watch_lag() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.05)
            lags_ms.append((time.perf_counter() - t - 0.05) * 1000)

    watcher = asyncio.ensure_future(watch_lag())
    async with (raw_sender if raw else aiohttp_sender)(base_url, bodies, timeout_s, max_in_flight) as send_one:
        i = 0
        for rate, seconds in steps:
            step = Outcomes()
            step_start = time.perf_counter()
            first_lag = len(lags_ms)
            n = int(rate * seconds)
            for k in range(n):
                if stop.is_set():
                    break
                due = step_start + k / rate
                if (wait := due - time.perf_counter()) > 0:
                    await asyncio.sleep(wait)
                if len(tasks) >= max_in_flight:
                    step.add("lost", time.perf_counter() - began, note="client in-flight cap")
                    continue
                task = asyncio.ensure_future(send_one(i, step, began))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                i += 1
            stopped = stop.is_set()
            if not stopped and (rest := step_start + seconds - time.perf_counter()) > 0:
                await asyncio.sleep(rest)  # a step lasts its seconds, however short its last gap
            ran_s = time.perf_counter() - step_start if stopped else seconds
            done.append(Step(rate, ran_s, step, max(lags_ms[first_lag:], default=0.0)))
            if stopped:
                break
        await asyncio.gather(*tasks)
    watcher.cancel()
    return done


async def open_loop(
    base_url: str,
    bodies: list[dict],
    steps: list[tuple[float, float]],
    timeout_s: float,
    max_in_flight: int,
    raw: bool = False,
    stop: threading.Event | None = None,
) -> tuple[Outcomes, list[dict]]:
    """open_loop_steps: all outcomes, and one summary per step."""
    done = await open_loop_steps(base_url, bodies, steps, timeout_s, max_in_flight, raw, stop)
    out = Outcomes()
    for step in done:
        out.merge(step.outcomes)
    return out, [step.summary() for step in done]


@contextlib.asynccontextmanager
async def aiohttp_sender(base_url: str, bodies: list[dict], timeout_s: float, connections: int):
    """`send_one(i, out, began)`: the i-th body (cyclically) over aiohttp."""
    async with client(base_url, timeout_s, connections) as c:
        yield lambda i, out, began: send(c, bodies[i % len(bodies)], out, began)


@contextlib.asynccontextmanager
async def raw_sender(base_url: str, bodies: list[dict], timeout_s: float, connections: int):
    """aiohttp_sender on bare keep-alive HTTP/1.1 connections. aiohttp spends ~0.6 ms of
    CPU per request: at 150/s a tenth of a core taken from the service under test on a
    shared machine; this spends about half."""
    url = urlsplit(base_url)
    path = url.path.rstrip("/") + "/v1/classify"
    wire = [
        f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(b)}\r\n\r\n".encode()
        + b
        for b in (json.dumps(body).encode() for body in bodies)
    ]
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def send_one(i: int, out: Outcomes, began: float) -> None:
        start, conn = time.perf_counter(), None
        try:
            async with asyncio.timeout(timeout_s):
                conn = idle.pop() if idle else await asyncio.open_connection(url.hostname, url.port)
                conn[1].write(wire[i % len(wire)])
                status = int((await conn[0].readline()).split()[1])
                length, retry_after = 0, False
                while (line := (await conn[0].readline()).lower()) not in (b"\r\n", b""):
                    length = int(line[15:]) if line.startswith(b"content-length:") else length
                    retry_after = retry_after or line.startswith(b"retry-after:")
                note = (await conn[0].readexactly(length)).decode(errors="replace")
        except TimeoutError:
            out.add("hung", start - began)
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError) as e:
            out.add("lost", start - began, note=type(e).__name__)
        else:
            idle.append(conn)
            ms = (time.perf_counter() - start) * 1000
            if status == 200:
                out.add("ok", start - began, 200, ms, note=note)
            elif status in (429, 503) and retry_after:
                out.add("refused", start - began, status, ms, note=note)
            else:
                out.add("unexpected", start - began, status, note=note)
            return
        if conn is not None:
            conn[1].close()

    try:
        yield send_one
    finally:
        for _, writer in idle:
            writer.close()


def open_loop_at(
    start_at_s: float,
    base_url: str,
    bodies: list[dict],
    steps: list[tuple[float, float]],
    timeout_s: float,
    max_in_flight: int,
    raw: bool = False,
) -> tuple[dict, list[tuple[float, float]]]:
    """open_loop from wall-clock `start_at_s` on, in whichever process calls it: the
    summary of all steps and, per answered ticket, (sent at s since the start, latency ms).
    Two streams measured apart go in two processes: in one event loop, the sends of one
    delay the timings of the other."""
    time.sleep(max(0.0, start_at_s - time.time()))
    out, _ = asyncio.run(open_loop(base_url, bodies, steps, timeout_s, max_in_flight, raw))
    return out.summary(), list(zip(out.ok_at_s, out.ok_ms))
