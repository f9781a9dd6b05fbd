"""One command for the load suite: starts each target on this machine, runs the Locust
suite headless against it with the same shape, and writes the report.

    python -m loadtest.run                       # all targets (about 10 minutes)
    python -m loadtest.run --targets graph       # the full graph only
    python -m loadtest.run --regime llm          # generate mode on a Qwen2-0.5B-shaped decoder

Targets, one after the other on the same cores, same model directory, same offered load:
  graph     (c) serve_config.yaml as shipped (edge tier, caches, control policies)
  edge_off  (b) the same graph with templates, result cache and pre-classifier off:
            every ticket goes to the model (the seeds' "before")
  vllm      (a) vLLM's OpenAI-compatible server, POST /classify (what a user runs instead)
  offline   the engine's offline batch rate (bench.offline_rate), no server at all

--regime llm: the model is a random-weight decoder of a small instruct LLM's shape
(models/tiny_decoder.py, built on first use) choosing a label by constrained decoding;
the graph runs it in generate mode, and vLLM's server gets the same prompt and the same
structured-output choice on POST /v1/completions. Its labels mean nothing (random
weights): the regime measures cost where a model call costs far more than a Serve hop.

Ray is started (dashboard, Prometheus export on --metrics-port) unless one runs already;
the graph targets are deployed with `serve deploy` and shut down afterwards, so a graph
you were serving is replaced. Everything targets 127.0.0.1 and is bounded in users, time
and tickets. Output in --out: per target Locust's CSVs and HTML report and every ticket's
record (<target>_tickets.csv); latency.png, latency_vs_users.png, throughput_by_route.png;
summary.json (stages, criteria, peers, cost) and summary.md. Exit code 1 when the full
graph fails the criteria.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import httpx
import yaml

from deployments.config import EDGE_OFF
from deployments.engines.device_readings import cuda_available
from deployments.ray_env import cluster_env
from loadtest.options import add_shared, forward, scaled_stage_users
from loadtest.pinning import EnginePinner, parse_cpus
from loadtest.report import (
    abuse,
    cost_per_million,
    plot,
    read_records,
    stages,
    suite_verdict,
    sustained,
    verdict,
)
from models.tiny_decoder import SHAPES as DECODER_SHAPES

ROOT = Path(__file__).resolve().parent.parent
LLM_MODELS = ROOT / "artifacts" / "models"
SERVE_URL = "http://127.0.0.1:8000"
VLLM_PORT = 18600
MODEL_NAME = "ticket-classifier"  # vLLM's server's --served-model-name
GRAPH_TARGETS = {"graph": {}, "edge_off": {"edge": EDGE_OFF}}
LABELS = {"graph": "(c) full graph", "edge_off": "(b) graph, edge off", "vllm": "(a) vLLM server"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--targets",
        default=None,
        help="comma-separated, run in this order (default vllm,offline,edge_off,graph; "
        "--regime llm: vllm,edge_off,graph)",
    )
    p.add_argument(
        "--regime",
        choices=("classify", "llm"),
        default="classify",
        help="classify: the Serve config's model as it is; llm: generate mode on a random-weight decoder of --llm-shape",
    )
    p.add_argument(
        "--llm-shape",
        choices=DECODER_SHAPES,
        default="qwen2-0.5b",
        help="--regime llm: the decoder's shape (tiny: seconds per run, for tests)",
    )
    p.add_argument("--config", type=Path, default=ROOT / "serve_config.yaml", help="the graph's Serve config")
    add_shared(p)
    p.add_argument(
        "--price-per-replica-hour",
        type=float,
        default=0.085,
        help="dollars per hour of the machine one replica needs (default: a 2-vCPU cloud VM; "
        "use the GPU instance's price for serve_config.gpu.yaml)",
    )
    p.add_argument("--offline-tickets", type=int, default=2000, help="texts in the offline batch measurement")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="Ray's Prometheus export (set on a Ray this command starts; sampled during graph runs)",
    )
    p.add_argument(
        "--proxy",
        choices=("haproxy", "python"),
        default="haproxy",
        help="Serve's HTTP front on a Ray this command starts: its HAProxy mode (the served default) "
        "or the Python proxy (deployments/ray_env.py)",
    )
    p.add_argument(
        "--engine-cpus",
        default=None,
        help="e.g. 1: every vLLM engine on these CPUs, one thread per CPU, everything else on the "
        "others, the peers' and the graph's alike; a CPU box standing in for a GPU node "
        "(loadtest/pinning.py; needs a Ray this command starts)",
    )
    p.add_argument("--out", type=Path, default=None, help="default bench/results/loadtest/<UTC time>")
    return p


def main() -> int:
    p = parser()
    args = p.parse_args()

    llm = args.regime == "llm"
    default_targets = "vllm,edge_off,graph" if llm else "vllm,offline,edge_off,graph"
    targets = [t.strip() for t in (args.targets or default_targets).split(",") if t.strip()]
    allowed = {*GRAPH_TARGETS, "vllm"} | (set() if llm else {"offline"})
    if unknown := set(targets) - allowed:
        p.error(f"unknown targets {sorted(unknown)} for --regime {args.regime}; allowed: {', '.join(sorted(allowed))}")
    try:
        engine_cpus = parse_cpus(args.engine_cpus) if args.engine_cpus else None
    except ValueError as e:
        p.error(str(e))
    if engine_cpus and _ray_running(os.environ):
        p.error("--engine-cpus needs a Ray this command starts (its processes must stay off the engine's CPUs)")
    with EnginePinner(engine_cpus) if engine_cpus else contextlib.nullcontext():
        return _run_suite(args, targets, llm, engine_cpus)


def _run_suite(args, targets: list[str], llm: bool, engine_cpus: set[int] | None) -> int:
    out = args.out or ROOT / "bench" / "results" / "loadtest" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    env = cluster_env(ROOT, haproxy=args.proxy == "haproxy")
    model_dir = _llm_model_dir(args.llm_shape) if llm else _model_dir(args.config)
    model_args = _llm_graph_args(model_dir, args.max_p99_ms) if llm else {}
    pinned_args = {}
    if engine_cpus:
        # One engine thread per engine CPU, in the graph and (vLLM keeps the one it finds) the peers.
        env["OMP_NUM_THREADS"] = str(len(engine_cpus))
        pinned_args = {"model": {"engine": {"cpu_threads": len(engine_cpus)}}}
    started_ray, exit_codes, offline = None, {}, None
    try:
        for target in targets:
            print(f"== {target}", flush=True)
            if target in GRAPH_TARGETS:
                if started_ray is None:  # not before: the peers run without Ray beside them
                    started_ray = _ensure_ray(env, args.metrics_port)
                config = _graph_config(
                    args.config, [model_args, pinned_args, GRAPH_TARGETS[target]], out / f"serve_config.{target}.yaml"
                )
                deployed = time.time()
                _run(["serve", "deploy", str(config)], env)
                try:
                    # /healthz alone may still be the graph that answered before the deploy.
                    _wait_deployed(env, deployed, 600)
                    _wait_healthy(f"{SERVE_URL}/healthz", 600)
                    sampler = MetricsSampler(args.metrics_port)
                    sampler.start()
                    exit_codes[target] = _locust(args, target, SERVE_URL, ["--api", "ticketserve"], out, env)
                    (out / f"{target}_metrics.json").write_text(json.dumps(sampler.stop(), indent=2))
                finally:
                    _run(["serve", "shutdown", "-y"], env)
                    # HAProxy mode: the command returns while the ingress replicas still
                    # drain; a deploy meanwhile was lost with them.
                    _wait_shut_down(env, 120)
            elif target == "vllm":
                exit_codes[target] = _with_vllm_server(args, model_dir, out, _peer_env(env), llm)
            else:
                offline_json = out / "offline_rate.json"
                offline_json.unlink(missing_ok=True)
                # vLLM's engine sometimes aborts in its C++ teardown at interpreter exit, after
                # the result is written: the result file, not the exit code, says it ran.
                # Its engine runs inside it (one process): all of it goes on the engine's CPUs.
                pinned = ["taskset", "-c", ",".join(map(str, sorted(engine_cpus)))] if engine_cpus else []
                _run(
                    [
                        *pinned,
                        sys.executable,
                        "-m",
                        "bench.offline_rate",
                        "--tickets",
                        str(args.offline_tickets),
                        "--model-dir",
                        model_dir,
                        "--out",
                        str(offline_json),
                    ],
                    _peer_env(env),
                    check=False,
                )
                offline = json.loads(offline_json.read_text())
    finally:
        if started_ray:
            _run(["ray", "stop"], env)
    summary = report(args, targets, out, offline, exit_codes)
    graphs = [t for t in targets if t in GRAPH_TARGETS]
    result = suite_verdict(
        graphs, {t: summary["targets"][t]["verdict"] for t in graphs if t in summary["targets"]}, exit_codes
    )
    for check in result["checks"]:
        if not check["passed"]:
            print(f"FAIL: {check['check']} ({check.get('value')})", flush=True)
    return 0 if result["passed"] else 1


def report(args, targets: list[str], out: Path, offline: dict | None, exit_codes: dict) -> dict:
    users = scaled_stage_users(args)
    judged = round(args.judged_users * args.user_scale)
    runs = {t: read_records(out / f"{t}_tickets.csv") for t in targets if (out / f"{t}_tickets.csv").exists()}
    summary: dict = {"machine": _machine(), "settings": {k: str(v) for k, v in vars(args).items()}, "targets": {}}
    for target, records in runs.items():
        rows = stages(records, users, args.stage_seconds)
        best = sustained(rows, args.max_p99_ms)
        summary["targets"][target] = {
            "label": LABELS[target],
            "stages": rows,
            "sustained_at_slo": best,
            "peak_answered_per_s": max((s["answered_per_s"] for s in rows), default=0.0),
            "abuse": abuse(records),
            "verdict": verdict(rows, sum(not r.valid for r in records), judged, args.max_p99_ms, args.max_error_rate),
            "locust_exit_code": exit_codes.get(target),
            "cost_per_million_usd": cost_per_million(best["answered_per_s"], args.price_per_replica_hour),
        }
        if (metrics := out / f"{target}_metrics.json").exists():
            summary["targets"][target]["graph_metrics"] = json.loads(metrics.read_text())
    t = summary["targets"]
    if "graph" in t:
        summary["verdict"] = t["graph"]["verdict"]
    summary["comparison"] = _comparison(t, offline, args.batch_size, args.regime == "llm")
    if offline:
        summary["offline"] = offline
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    text = _markdown(summary, users, judged)
    (out / "summary.md").write_text(text)
    print(text)
    if runs:
        for path in plot(runs, users, args.stage_seconds, out):
            print(f"wrote {path}")
    print(f"wrote {out / 'summary.json'}")
    return summary


@dataclass(frozen=True)
class Goal:
    op: Literal[">=", "<="]
    bound: float

    def met(self, value: float | None) -> bool | None:
        """None: not measured."""
        if value is None:
            return None
        return value >= self.bound if self.op == ">=" else value <= self.bound

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def _comparison(t: dict, offline: dict | None, batch_size: int = 1, llm: bool = False) -> dict:
    """The load suite's goals: (c) >= 3x (b) and <= 0.4x its model-path P99; (c) >= 1.5x (a) at
    a P99 no worse; the served model path (b) >= 0.8 of the offline batch rate; batch
    clients: (c)'s tickets/s >= 0.9 of the offline rate. LLM-sized regime (`llm`): (c) >=
    1.5x both (a) and (b) at a P99 no worse than (a)'s."""

    def rate(name):
        # Degraded answers (the pre-classifier standing in for a refused model path) are not
        # what the peers deliver: the graph is credited with the rest.
        best = t.get(name, {}).get("sustained_at_slo", {})
        return best.get("full_answers_per_s", best.get("answered_per_s"))

    def get(name, key):
        return t.get(name, {}).get("sustained_at_slo", {}).get(key)

    ratios = {
        "c_over_b_throughput": (_ratio(rate("graph"), rate("edge_off")), Goal(">=", 1.5 if llm else 3)),
        "c_over_a_throughput": (_ratio(rate("graph"), rate("vllm")), Goal(">=", 1.5)),
        "c_p99_over_a_p99": (_ratio(get("graph", "p99_ms"), get("vllm", "p99_ms")), Goal("<=", 1)),
    }
    if not llm:
        ratios["c_over_b_model_path_p99"] = (
            _ratio(get("graph", "model_path_p99_ms"), get("edge_off", "model_path_p99_ms")),
            Goal("<=", 0.4),
        )
    if offline and "edge_off" in t:
        peak = t["edge_off"]["peak_answered_per_s"]
        ratios["served_model_path_over_offline"] = (_ratio(peak, offline["tickets_per_s"]), Goal(">=", 0.8))
    if offline and batch_size > 1 and "graph" in t:
        peak = t["graph"]["peak_answered_per_s"]
        ratios["batch_graph_over_offline"] = (_ratio(peak, offline["tickets_per_s"]), Goal(">=", 0.9))
    return {name: {"value": v, "goal": str(goal), "met": goal.met(v)} for name, (v, goal) in ratios.items()}


def _markdown(summary: dict, users: list[int], judged: int) -> str:
    lines = [
        f"# Load test, {summary['machine']['when']}",
        "",
        f"Stages (users): {users}; criteria judged up to {judged} users; "
        f"{summary['settings']['batch_size']} ticket(s) per request.",
        "",
    ]
    if summary["settings"]["engine_cpus"] != "None":
        lines += [
            f"Engines on CPUs {summary['settings']['engine_cpus']} (one thread per CPU), everything else "
            "on the others (--engine-cpus).",
            "",
        ]
    for s in summary["targets"].values():
        v = s["verdict"]
        lines += [
            f"## {s['label']}: {'PASS' if v['passed'] else 'FAIL'}",
            "",
            "| users | tickets/s | P50 ms | P99 ms | P99.9 ms | model-path P99 ms | error rate | interception | degraded |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in s["stages"]:
            lines.append(
                f"| {r['users']} | {r['answered_per_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['p999_ms']} | "
                f"{r['model_path_p99_ms']} | {r['error_rate']} | {r['interception']} | {r.get('degraded_share')} |"
            )
        best = s["sustained_at_slo"]
        sustained_line = (
            f"Sustained at P99 <= SLO: {best['answered_per_s']} tickets/s, {best.get('full_answers_per_s')} "
            f"not degraded ({best['users']} users, "
            f"P99 {best['p99_ms']} ms); cost per million tickets: ${s['cost_per_million_usd']}"
        )
        lines += ["", sustained_line, ""]
        if gm := s.get("graph_metrics"):
            line = (
                f"Graph metrics under load (Prometheus export): batch efficiency {gm.get('batch_efficiency')} "
                f"(seeds: >= 0.7), memory pressure max {gm.get('memory_pressure')} (seeds: <= 0.9), "
                f"prefix-cache hit rate {gm.get('prefix_cache_hit_rate')} (seeds: >= 0.85; none without a KV cache), "
                f"batch knob max {gm.get('batch_limit')}, in engine max {gm.get('inflight')}"
            )
            lines += [line, ""]
        failed = [c for c in v["checks"] if not c["passed"]]
        if failed:
            lines += [
                "Failed: "
                + "; ".join(
                    f"{c['check']} {c['value']} (limit {c['limit']}, {c.get('users', 'all')} users)" for c in failed
                ),
                "",
            ]
    lines += ["## Peers", "", "| ratio | value | goal | met |", "|---|---|---|---|"]
    for name, g in summary["comparison"].items():
        lines.append(f"| {name} | {g['value']} | {g['goal']} | {g['met']} |")
    if "offline" in summary:
        lines += ["", f"Offline batch rate: {summary['offline']['tickets_per_s']} tickets/s."]
    return "\n".join(lines) + "\n"


def _machine() -> dict:
    import platform

    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _run(cmd: list[str], env: dict, check: bool = True) -> int:
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, cwd=ROOT, check=check).returncode


def _ray_running(env) -> bool:
    return subprocess.run(["ray", "status"], env=env, capture_output=True, check=False).returncode == 0


def _ensure_ray(env: dict, metrics_port: int) -> bool:
    """True when this command started Ray (and stops it at the end)."""
    if _ray_running(env):
        return False
    _run(
        [
            "ray",
            "start",
            "--head",
            "--dashboard-host",
            "127.0.0.1",
            "--include-dashboard",
            "true",
            "--metrics-export-port",
            str(metrics_port),
            "--disable-usage-stats",
        ],
        env,
    )
    return True


def _model_dir(config: Path) -> str:
    args = yaml.safe_load(config.read_text())["applications"][0]["args"]
    model_dir = Path(args.get("model", {}).get("engine", {}).get("model_dir", "artifacts/models/default"))
    return str(model_dir if model_dir.is_absolute() else ROOT / model_dir)


def _llm_graph_args(model_dir: str, slo_ms: float) -> dict:
    """serve_config.yaml's graph in generate mode on the decoder, its latency triggers moved
    from the CPU classifier's 2 s SLO to the regime's (--max-p99-ms): at the shipped 2 s a
    call of a loaded 0.5B decoder (1.6-6 s here) counts as slow, and the breaker opened.
    The decoder computes on every core, as vLLM's server does (the classifier on one)."""
    return {
        "model": {
            "engine": {"mode": "generate", "model_dir": model_dir, "cpu_threads": os.cpu_count()},
            "batching": {"shrink_above_p95_ms": slo_ms / 2},
        },
        "ingress": {"admission": {"target_p99_ms": slo_ms}},
        "breaker": {"slow_call_ms": slo_ms},
    }


def _llm_model_dir(shape: str) -> str:
    """The regime's decoder, built on first use (qwen2-0.5b: about a minute, 1.4 GB), and
    again where it was built before its edge pre-classifier had gates of its own."""
    from models.artifacts import METADATA_FILE, ModelMetadata
    from models.tiny_decoder import build_tiny_decoder

    out = LLM_MODELS / f"llm-{shape}"
    if not (out / METADATA_FILE).exists() or not ModelMetadata.load(out).edge_min_confidence:
        print(f"building a random-weight {shape} decoder in {out}", flush=True)
        build_tiny_decoder(out, shape=shape, edge_classifier=True)
    return str(out)


def _graph_config(base: Path, overrides: list[dict], path: Path) -> Path:
    from loadkit.graph_args import merged

    config = yaml.safe_load(base.read_text())
    app = config["applications"][0]
    args = app.get("args", {})
    for override in overrides:
        args = merged(args, override)
    app["args"] = args
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _wait_deployed(env: dict, since: float, timeout_s: float) -> None:
    """Until `serve status` shows every application deployed after `since` and RUNNING."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = subprocess.run(["serve", "status"], env=env, capture_output=True, text=True, check=False)
        apps = (yaml.safe_load(status.stdout) or {}).get("applications") or {} if status.returncode == 0 else {}
        if apps and all(
            a.get("status") == "RUNNING" and a.get("last_deployed_time_s", 0) >= since - 1 for a in apps.values()
        ):
            return
        time.sleep(2)
    raise RuntimeError(f"the deployed config was not running after {timeout_s:.0f} s (serve status)")


def _wait_shut_down(env: dict, timeout_s: float) -> None:
    """Until `serve status` shows no application (or no Serve at all)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = subprocess.run(["serve", "status"], env=env, capture_output=True, text=True, check=False)
        if status.returncode != 0 or not (yaml.safe_load(status.stdout) or {}).get("applications"):
            return
        time.sleep(2)
    raise RuntimeError(f"Serve still had applications {timeout_s:.0f} s after `serve shutdown`")


def _wait_healthy(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise RuntimeError(f"{url} not healthy after {timeout_s:.0f} s")


def _peer_env(env: dict) -> dict:
    """The peers run vLLM as the graph's model replica does: on CPU its model worker inside
    the engine-core process (`engine.cpu_worker_in_engine_process`), which here more than
    doubled the offline rate; comparing against vLLM's slower default layout would flatter
    the graph. Set VLLM_ENABLE_V1_MULTIPROCESSING=1 to measure that layout."""
    if cuda_available():
        return env
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", **env}


def _with_vllm_server(args, model_dir: str, out: Path, env: dict, generate: bool) -> int:
    with vllm_server(model_dir, out, env, generate) as url:
        return _locust(args, "vllm", url, peer_api(model_dir, generate), out, env)


def peer_api(model_dir: str, generate: bool) -> list[str]:
    """The Locust file's options for vLLM's server on `model_dir`."""
    api = ["--api", "vllm-generate", "--model-dir", model_dir] if generate else ["--api", "vllm"]
    return [*api, "--vllm-model", MODEL_NAME]


@contextlib.contextmanager
def vllm_server(model_dir: str, out: Path, env: dict, generate: bool, wait: bool = True) -> Generator[str, None, None]:
    """vLLM's OpenAI-compatible server on `model_dir`, its base URL; `wait`: once healthy
    (else at once: the caller waits with `_wait_healthy(url + "/health", ...)`)."""
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--runner",
        "generate" if generate else "pooling",
        "--served-model-name",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(VLLM_PORT),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--gpu-memory-utilization",
        "0.1",
        # Its per-request access log costs CPU our graph does not spend (Serve buffers its own).
        "--disable-uvicorn-access-log",
    ]
    print("$ " + " ".join(cmd), flush=True)
    url = f"http://127.0.0.1:{VLLM_PORT}"
    with open(out / "vllm_server.log", "w") as log:
        server = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if wait:
                _wait_healthy(f"{url}/health", 600)
            yield url
        finally:
            os.killpg(server.pid, signal.SIGINT)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


# Gauges sampled from Ray's Prometheus export while a graph target runs: the seeds also
# judge batch efficiency (>= 70 %), memory (<= 90 %) and KV hit rate (>= 85 %).
SAMPLED = {
    "batch_efficiency": ("ray_model_batch_efficiency", "mean"),
    "batch_limit": ("ray_model_batch_limit", "max"),
    "inflight": ("ray_model_inflight_requests", "max"),
    "memory_pressure": ("ray_model_memory_pressure", "max"),
    "vllm_kv_cache_usage": ("ray_vllm_kv_cache_usage_perc", "max"),
}
COUNTED = ("ray_vllm_prefix_cache_hits_total", "ray_vllm_prefix_cache_queries_total")


class MetricsSampler(threading.Thread):
    """Reads the graph's own gauges every few seconds during a run, as Grafana would."""

    def __init__(self, port: int, interval_s: float = 5.0):
        super().__init__(daemon=True)
        self._url = f"http://127.0.0.1:{port}/metrics"
        self._interval_s = interval_s
        self._stop_event = threading.Event()
        self.samples: list[dict[str, float]] = []

    def run(self) -> None:
        while not self._stop_event.wait(self._interval_s):
            if (sample := self._read()) is not None:
                self.samples.append(sample)

    def _read(self) -> dict[str, float] | None:
        from prometheus_client.parser import text_string_to_metric_families

        try:
            text = httpx.get(self._url, timeout=5).text
        except httpx.HTTPError:
            return None
        values: dict[str, list[float]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values.setdefault(sample.name, []).append(sample.value)
        out = {}
        for key, (name, _) in SAMPLED.items():
            if name in values:
                out[key] = sum(values[name]) / len(values[name])
        for name in COUNTED:
            if name in values:
                out[name] = sum(values[name])
        return out

    def stop(self) -> dict:
        """Mean or max of each gauge over samples taken under load; the prefix-cache hit rate."""
        self._stop_event.set()
        if self.is_alive():
            self.join(10)
        busy = [s for s in self.samples if s.get("inflight", 0) > 0]
        summary = {}
        for key, (_, how) in SAMPLED.items():
            seen = [s[key] for s in busy if key in s]
            if seen:
                summary[key] = round(max(seen) if how == "max" else sum(seen) / len(seen), 3)
        first, last = (self.samples[0], self.samples[-1]) if self.samples else ({}, {})
        hits, queries = (last.get(n, 0) - first.get(n, 0) for n in COUNTED)
        summary["prefix_cache_hit_rate"] = round(hits / queries, 4) if queries > 0 else None
        summary["samples_under_load"] = len(busy)
        return summary


def _locust(args, target: str, host: str, api_args: list[str], out: Path, env: dict) -> int:
    """Locust in its own process: its gevent patching must not meet Ray's or vLLM's imports."""
    total_s = len(scaled_stage_users(args)) * args.stage_seconds
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(ROOT / "loadtest" / "locustfile.py"),
        "--headless",
        "--host",
        host,
        *api_args,
        *forward(args),
        "--run-time",
        f"{int(total_s + 30)}s",
        "--stop-timeout",
        "10",
        "--csv",
        str(out / target),
        "--csv-full-history",
        "--html",
        str(out / f"{target}.html"),
        "--only-summary",
        "--loglevel",
        "INFO",
    ]
    return _run(cmd, env, check=False)


if __name__ == "__main__":
    sys.exit(main())
