"""Every metric the Grafana dashboard queries is exported by a running graph through Ray's
Prometheus endpoint, and a real Prometheus (Debian's package; skipped where missing)
scraping that endpoint answers every panel's query and raises the alerts the run cues.
The graph here is driven through every event a panel shows: edge routes, spam, rate
limits, tokenizer fallbacks and an unreachable tokenizer, engine failures (retries,
give-ups, reclaim, breaker transitions), vLLM's prefix cache, answers by label and a
reviewer's verdict on an audited answer."""

import concurrent.futures as cf
import contextlib
import itertools
import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from ray import serve

from tests.harness import METRICS_PORT, generate_args, running

APP = "observed"
ADMIN_TOKEN = "observed-admin-token-5e81"
DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
DASHBOARD = DASHBOARDS / "ticketserve.json"
PROMETHEUS = shutil.which("prometheus")
# Grafana's $__rate_interval, wide enough to hold the whole driven run.
RATE_INTERVAL = "5m"


def dashboard_metrics() -> set[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    return {name for expr in exprs for name in re.findall(r"\bray_[A-Za-z0-9_]+", expr)}


def exported() -> set[str]:
    text = httpx.get(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=30).text
    return {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """A Prometheus scraping the test cluster's metrics export every 5 s and evaluating
    the alert rules every second; its HTTP API's base URL, or None where it is not installed."""
    if PROMETHEUS is None:
        yield None
        return
    tmp = tmp_path_factory.mktemp("prometheus")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shutil.copy(DASHBOARDS / "alerts.yaml", tmp / "alerts.yaml")
    (tmp / "prometheus.yml").write_text(
        # Ray's export of a whole graph takes seconds to render on 2 busy cores: scraped
        # every second (each scrape then times out at 1 s) Prometheus stored nothing and
        # the abandoned scrapes starved the test's own reads. The export also grows over a
        # session (counters of every replica the earlier tests ran stay in it), so at the
        # end of a CI run a scrape gets 10 s.
        "global: {scrape_interval: 10s, scrape_timeout: 10s, evaluation_interval: 1s}\n"
        "rule_files: [alerts.yaml]\n"
        f"scrape_configs: [{{job_name: ray, static_configs: [{{targets: ['127.0.0.1:{METRICS_PORT}']}}]}}]\n"
    )
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "prometheus.log").open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError(f"prometheus not ready: {(tmp / 'prometheus.log').read_text()[-2000:]}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def query(prometheus: str, expr: str, since: float) -> list:
    """The series `expr` has between `since` (epoch s) and now, as a Grafana panel reads it
    over its time range: an instant query at the end alone would miss a gauge whose
    replica has stopped reporting it (Prometheus marks it stale at once)."""
    params = {"query": expr, "start": since, "end": time.time(), "step": 5}
    answer = httpx.get(f"{prometheus}/api/v1/query_range", params=params, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@pytest.fixture(scope="module")
def observed(ray_serve, tiny_decoder_dir, tmp_path_factory, prometheus):
    tenants = tmp_path_factory.mktemp("observed") / "tenants.yaml"
    tenants.write_text("acme: Acme sells outdoor clothing; tickets about torn or missing items are refunds.\n")
    # Generate mode: the tiny decoder's shared instruction prefix feeds vLLM's prefix cache.
    args = generate_args(
        tiny_decoder_dir,
        topology="chain",
        antispam={
            "rate_limit": {
                "tiers": {
                    "anonymous": {"requests_per_s": 1, "burst_window_s": 1},
                    "standard": {"requests_per_s": 10_000},
                }
            },
            "duplicates": {"max_repeats": 10_000},
        },
        tokenizer={"timeout_ms": 0.001},
        # Give-ups answer 503 overloaded instead of a degraded 200: the error-rate alert's cue.
        edge={"degraded_enabled": False},
        model={
            "engine": {
                "mode": "generate",
                "model_dir": tiny_decoder_dir,
                "gpu_memory_utilization": 0.15,
                "tenant_instructions_file": str(tenants),
            },
            "reclaim": {"failed_in_row": 1000, "min_interval_s": 0},
        },
        kv_cache={"enabled": True, "report_interval_ms": 200},
        breaker={
            "window_calls": 10,
            "min_calls": 5,
            # Failures open it, not slowness: beside the graph tier (scripts/test.sh) the
            # tokenizer burst's calls pass 2 s, and an open breaker refused every cue after it.
            "slow_call_ms": 60_000,
            # Open long enough to cross a 10 s export and a 10 s scrape: a shorter opening
            # is seen by Prometheus only when one happens to fall inside it.
            "open_wait_s": 25,
            "half_open_probes": 1,
            "cpu_reject_percent": None,
            "memory_fallback_percent": 99,
        },
        retry={"budget_min_retries": 1000},
        # The run answers tens of tickets, not the hundreds a steady drift reading needs.
        ingress={"label_drift": {"min_answers": 5}},
        # Every answer not flagged (the template's, at least) is audited: the review loop's
        # panels get an audited answer to resolve.
        review={
            "audit_share": 1.0,
            "report_interval_s": 1,
            "store_path": str(tmp_path_factory.mktemp("review") / "queue.sqlite3"),
        },
        admin={"token": ADMIN_TOKEN},
    )
    # One tokenizer slot and one queue place: a burst finds it full (tokenizer unreachable).
    # The edge router autoscaled by the shipped policy (held at one replica): the replicas
    # and scaling-decision panels.
    policy = {"policy_function": "deployments.control.autoscaling:QueueLatencyPolicy"}
    options = {
        "Tokenizer": {"max_ongoing_requests": 1, "max_queued_requests": 1},
        "EdgeRouter": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1, "policy": policy}},
    }
    with running(ray_serve, APP, args, options) as client:
        yield client


@contextlib.contextmanager
def model_fault(failure: str):
    """The observed graph's model replica failing every call with `failure` inside the block."""
    model = serve.get_deployment_handle("ModelReplica", APP)
    model.set_faults.remote({"failure": failure}).result()
    try:
        yield
    finally:
        model.set_faults.remote({}).result()


def test_dashboard_queries_only_project_and_vllm_metrics():
    names = dashboard_metrics()
    assert "ray_ticket_request_latency_ms_bucket" in names and "ray_vllm_prefix_cache_hits_total" in names
    assert len(names) >= 20


def test_every_dashboard_metric_is_exported(observed):
    def send(text: str, user: str | None = "u-observed") -> httpx.Response:
        return observed.post("/v1/classify", json={"text": text, "user_id": user} if user else {"text": text})

    def concurrently(texts: list[str], user: str | None = "u-observed") -> set[int]:
        with cf.ThreadPoolExecutor(16) as pool:
            return {r.status_code for r in pool.map(lambda t: send(t, user), texts)}

    def tokenizer_burst() -> None:
        # Many tickets at once against one tokenizer slot and one queue place: some find it full.
        assert concurrently([f"my coat arrived torn, case {time.monotonic()} {i}" for i in range(48)]) <= {200, 503}

    def anonymous_flood() -> None:
        # Arriving together, whatever the model's latency: the anonymous bucket holds one.
        assert 429 in concurrently([f"where is my order number {time.monotonic()} {i}" for i in range(8)], user=None)

    def shared_limiter_refusal() -> None:
        # The ingress replica's own count refuses first, so the shared limiter refuses only
        # what other replicas' tickets used up: here, one such replica's burst.
        key = f"addr:other-replica-{time.monotonic()}"
        asked = [(key, "anonymous", f"digest-{i}", None) for i in range(3)]
        admissions = serve.get_deployment_handle("RateLimiter", APP).admit_many.remote(asked).result()
        assert any(a.rule == "rate_limited" for a in admissions), admissions

    assert send("I forgot my password, how do I reset it?").json()["route"] == "template"
    for _ in range(2):
        assert send("the zipper of my new jacket broke").status_code == 200  # model, then cache
    assert send("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").status_code == 422
    for i in range(3):  # the tenant's own prefix: KV-cache manager and affinity router
        body = {"text": f"my Acme jacket arrived torn, order {i}", "user_id": "u-observed", "tenant": "acme"}
        assert observed.post("/v1/classify", json=body).status_code == 200
    anonymous_flood()
    tokenizer_burst()

    # A reviewer finds an audited answer wrong: reviews per hour and the audit estimate.
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    audited = observed.get("/admin/review?kind=audit&limit=1", headers=admin).json()["items"]
    assert audited, "no answer was recorded for audit"
    other = next(x["name"] for x in observed.get("/v1/labels").json()["labels"] if x["name"] != audited[0]["label"])
    resolved = observed.post(f"/admin/review/{audited[0]['id']}/resolve", json={"label": other}, headers=admin)
    assert resolved.status_code == 200, resolved.text

    def out_of_memory() -> None:  # not retried (the retry matrix); the replica reclaims
        with model_fault("out_of_memory"):
            assert send(f"the parcel came open and a shoe is missing, case {time.monotonic()}").status_code in (
                200,
                503,
            )

    def unavailable() -> None:  # retried once (the retry matrix), then degraded
        with model_fault("unavailable"):
            send(f"my refund for the broken lamp never came, case {time.monotonic()}")

    out_of_memory()
    with model_fault("unavailable"):
        breaker = serve.get_deployment_handle("Breaker", APP)
        for i in range(20):
            send(f"my refund for the broken lamp never came, try {i}")
            if breaker.state.remote().result()["state"] == "open":
                break

    # Ray pushes metrics to its exporter every few seconds. Events that depend on timing
    # (a full tokenizer queue; a ticket reaching the model while the breaker lets it) are
    # driven again while their metric has not shown up.
    shared_limiter_refusal()
    again = {
        "ray_tokenizer_unreachable_total": tokenizer_burst,
        "ray_rate_limiter_refusals_total": shared_limiter_refusal,
        "ray_model_retries_total": unavailable,
        "ray_model_reclaim_actions_total": out_of_memory,
    }
    # A gauge is held by Ray's agent for two export intervals after each report, so on a
    # busy machine one scrape can miss a series that the next one has: a name counts as
    # exported once any scrape showed it, as it would in Prometheus.
    wanted, seen = dashboard_metrics(), set()
    deadline = time.monotonic() + 90
    while (missing := wanted - (seen := seen | exported())) and time.monotonic() < deadline:
        for name in missing & again.keys():
            again[name]()
        time.sleep(3)
    assert not missing, f"dashboard queries metrics nobody exports: {sorted(missing)}"


def last(prometheus: str, expr: str, since: float) -> list:
    """The last ten values of each series of `expr` (failure messages)."""
    return [r["values"][-10:] for r in query(prometheus, expr, since)]


def scrapes(prometheus: str) -> dict:
    """How Prometheus's scrapes of Ray's export went over the last 10 minutes, for failure messages."""

    def instant(expr: str) -> list:
        answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()
        return [r["value"][1] for r in answer["data"]["result"]]

    targets = httpx.get(f"{prometheus}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
    return {
        "targets": [{k: t.get(k) for k in ("health", "lastError", "lastScrapeDuration")} for t in targets],
        "up_share": instant("avg_over_time(up[10m])"),
        "max_scrape_s": instant("max_over_time(scrape_duration_seconds[10m])"),
        "samples_scraped": instant("scrape_samples_scraped"),
    }


def panel_queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], t["expr"].replace("$__rate_interval", RATE_INTERVAL))
        for panel in board["panels"]
        for t in panel["targets"]
    ]


def test_prometheus_answers_every_panel_and_raises_the_cued_alerts(observed, prometheus):
    """Runs after the test above has driven every event (module order)."""
    if prometheus is None:
        pytest.skip("prometheus not installed (Debian: apt-get install prometheus)")
    # Ray's agent reports every few seconds and Prometheus scrapes every 10: a query may
    # need a scrape or two more than the export check above waited for.
    deadline = time.monotonic() + 90
    since = time.time() - 600
    while (empty := [q for q in panel_queries() if not query(prometheus, q[1], since)]) and time.monotonic() < deadline:
        time.sleep(2)
    assert not empty, f"panel queries without data in Prometheus: {empty}; scrapes: {scrapes(prometheus)}"
    # Cues for two alerts, kept up for several scrapes: Prometheus's rate() needs a counter
    # that rises between two of them, and a short breaker opening can fall between two.
    # With the model failing, every ticket ends 503 (give-ups are not answered degraded
    # here) and the breaker keeps opening; both alerts must go pending (their `for:` is
    # minutes, the run is not), which Prometheus records in its ALERTS series.
    cued, raised = {"ModelBreakerOpen", "TicketErrorRateHigh"}, set()
    with model_fault("unavailable"):
        deadline = time.monotonic() + 150
        for i in itertools.count():
            if cued <= raised or time.monotonic() > deadline:
                break
            body = {"text": f"my refund for the broken lamp never came, cue {i}", "user_id": "u-observed"}
            observed.post("/v1/classify", json=body)
            time.sleep(1)
            raised = {r["metric"]["alertname"] for r in query(prometheus, "ALERTS", since)}
    errors = 'sum(increase(ray_ticket_requests_total{status=~"5.."}[5m]))'
    assert cued <= raised, (
        f"alerts raised: {sorted(raised)}; breaker states {last(prometheus, 'max(ray_breaker_state)', since)}, "
        f"5xx {last(prometheus, errors, since)}; scrapes: {scrapes(prometheus)}"
    )
