"""Promo day: a 10x ticket surge against the graph on a simulated GPU cluster, one run per
autoscaling policy, all on the same profile in the same run (docs/policies.md#surge).

    python -m bench.surge --profile short --out bench/results/surge_short.json   # ~12 min
    python -m bench.surge --profile promo --out bench/results/surge_promo.json   # ~75 min

Each policy gets a fresh cluster (bench.surge_cluster: GPU nodes that the cluster
autoscaler starts after `--node-start-s`), the shipped graph with its model replica as a
GPU-shaped fake (deployments/engines/gpu_profile.py, scaled so that these two cores can
saturate it: each replica needs one GPU, so each one beyond the first is a new node), and
the load mix sent open-loop at the profile's rate, second by second; with
`--background-share`, that share of the rate is tickets marked `"priority": "background"`
(held by the ingress for capacity instead of refused, docs/policies.md#deferral), sent
beside the interactive ones and reported apart. In front of the ingress, Serve's HAProxy
mode as served (`--proxy python`: its Python proxy). Policies:
- `serve`: Serve's built-in policy on `target_ongoing_requests`;
- `queue_latency`: deployments.control.autoscaling.QueueLatencyPolicy (queue and P95);
- `prescale`: the same with an operator's schedule for the surge (policies/prescale.py).
Written: per-second series (offered, answered, refused, P99, replicas, nodes), a summary
per policy, the policies' scaling decisions from Serve's controller log, and a PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import psutil

from bench.common import LOAD_ANTISPAM, print_table, write_results
from bench.surge_cluster import FakeGpuCluster, gpu_nodes_alive
from deployments.ray_env import session_logs
from loadkit.generators import Outcomes, open_loop_steps, ticket_bodies
from loadkit.graph_args import merged
from loadkit.stats import percentile
from models.build import DEFAULT_OUT, ROOT
from policies.prescale import ScheduledSurge

if TYPE_CHECKING:
    from deployments.config import AppConfig

PORT = 8777
APP = "surge"
MODEL = "ModelReplica"
Policy = Literal["serve", "queue_latency", "prescale"]
Proxy = Literal["haproxy", "python"]
PhaseName = Literal["baseline", "ramp", "plateau", "peak", "return", "after"]
WITHIN_MS = 2000.0  # the seeds' bound: an answer later than this is as bad as none
# The load mix's tickets that reach a model replica (the rest: templates, the cache, the
# edge pre-classifier): 0.73 at the base rate of the published short run, 0.67 on its plateau.
MODEL_PATH_SHARE = 0.7


@dataclass(frozen=True)
class Phase:
    name: PhaseName
    seconds: int
    start_multiple: float  # of the base rate, at the phase's start
    end_multiple: float  # at its end: linear in between

    def multiple(self, t_s: float) -> float:
        return self.start_multiple + (self.end_multiple - self.start_multiple) * t_s / self.seconds


PROFILES: dict[str, tuple[Phase, ...]] = {
    # The seeds' day, compressed: to 5x within two minutes, then 10x, a 12.7x peak, the return.
    "promo": (
        Phase("baseline", 120, 1, 1),
        Phase("ramp", 90, 1, 5),
        Phase("plateau", 90, 5, 5),
        Phase("ramp", 60, 5, 10),
        Phase("plateau", 240, 10, 10),
        Phase("peak", 60, 12.7, 12.7),
        Phase("plateau", 120, 10, 10),
        Phase("return", 120, 10, 1),
        Phase("after", 180, 1, 1),
    ),
    # The same shape, about three minutes of load per policy.
    "short": (
        Phase("baseline", 30, 1, 1),
        Phase("ramp", 40, 1, 10),
        Phase("plateau", 50, 10, 10),
        Phase("return", 10, 10, 1),
        Phase("after", 50, 1, 1),
    ),
}
SURGE_PHASES = ("ramp", "plateau", "peak")


def seconds(phases: tuple[Phase, ...]) -> list[tuple[float, str]]:
    """(multiple of the base rate, phase name) for each second of the profile."""
    return [(p.multiple(t + 0.5), p.name) for p in phases for t in range(p.seconds)]


def surge_multiple(phases: tuple[Phase, ...]) -> float:
    """The plateau's load, as a multiple of the base rate: what a schedule announces and
    what capacity must meet (a peak above it is short)."""
    return max(p.end_multiple for p in phases if p.name == "plateau")


def surge_window_s(phases: tuple[Phase, ...]) -> tuple[float, float]:
    """Seconds from the start of the load to the surge's start and to its end."""
    starts = [sum(q.seconds for q in phases[:i]) for i in range(len(phases))]
    surging = [i for i, p in enumerate(phases) if p.name in SURGE_PHASES]
    return float(starts[surging[0]]), float(starts[surging[-1]] + phases[surging[-1]].seconds)


@dataclass(frozen=True)
class Settings:
    base_rate: float  # tickets/s at 1x
    max_replicas: int
    target_ongoing: int  # model requests per replica both policies aim at
    upscale_delay_s: float
    downscale_delay_s: float
    node_start_s: float
    replica_start_s: float  # the fake engine's start, on top of the replica process's own
    idle_timeout_s: float
    gpu_time_factor: float
    gpu_ceiling_divisor: int
    timeout_s: float  # client: an answer later than this is hung
    background_share: float  # of the rate: tickets that may wait
    warm_nodes: int = 0  # GPU nodes kept up from the cluster's start, before the load
    proxy: Proxy = "haproxy"  # in front of the ingress: Serve's HAProxy mode, as served
    scheduled_replicas: int = 0  # the prescale schedule's plan; 0: planned_replicas


def autoscaling(policy: Policy, s: Settings, surge: ScheduledSurge) -> dict:
    """The model replica's `autoscaling_config` for one policy: the same bounds, delays
    and target for all three."""
    config = {
        "min_replicas": 1,
        "max_replicas": s.max_replicas,
        "target_ongoing_requests": s.target_ongoing,
        "upscale_delay_s": s.upscale_delay_s,
        "downscale_delay_s": s.downscale_delay_s,
    }
    if policy == "serve":
        return config
    kwargs: dict = {"target_ongoing_per_replica": s.target_ongoing, "p95_target_ms": 1000, "scale_down_below": 0.5}
    if policy == "queue_latency":  # reactive only: no floor from the load's growth either
        kwargs["prescale"] = {"growth_enabled": False}
    if policy == "prescale":
        lead_s = s.node_start_s + s.replica_start_s + 15
        kwargs["prescale"] = {
            "schedule": [surge.model_dump()],
            "lead_s": lead_s,
            "horizon_s": lead_s,
            "reserve_replicas": 1,
            "give_back_after_s": 60,
        }
    policy_function = "deployments.control.autoscaling:QueueLatencyPolicy"
    return {**config, "policy": {"policy_function": policy_function, "policy_kwargs": kwargs}}


def app_config(s: Settings) -> AppConfig:
    """The graph's settings: the shipped ones on the fake GPU engine, calling the model
    replicas as the GPU config does (micro-batched), with the review store and the
    retrainer off (the surge is about serving)."""
    from deployments.config import AppConfig
    from loadkit.graph_args import shipped_args

    engine = {
        "mode": "fake",
        "model_dir": str(DEFAULT_OUT),
        "fake_gpu_profile": "gpu-e5-small",
        "fake_gpu_time_factor": s.gpu_time_factor,
        "fake_gpu_ceiling_divisor": s.gpu_ceiling_divisor,
        "fake_gpu_start_s": s.replica_start_s,
    }
    args = merged(
        shipped_args(),
        {
            "antispam": LOAD_ANTISPAM,
            "model": {"engine": engine},
            "micro_batch": shipped_args("serve_config.gpu.yaml")["micro_batch"],
            "review": {"enabled": False},
            "retrain": {"enabled": False},
        },
    )
    return AppConfig.from_args(args)


def graph(policy: Policy, s: Settings, surge: ScheduledSurge, config: AppConfig):
    from serve_app import bind_graph

    options = {
        MODEL: {
            "autoscaling_config": autoscaling(policy, s, surge),
            "ray_actor_options": {"num_cpus": 0, "num_gpus": 1},
        }
    }
    return bind_graph(config, options)


def background_budget_s(config: AppConfig) -> float:
    """What the API tells a background caller to allow (docs/api.md): the hold, then one
    ticket's budget. A background ticket is hung only past it."""
    return config.ingress.background.max_wait_s + config.ingress.request_timeout_s


@dataclass
class Sample:
    at_s: float  # since the load's start
    replicas: int  # running
    starting: int
    nodes: int  # GPU nodes up


def watch(began: float, stop: threading.Event, out: list[Sample]) -> None:
    """Every second: priorities (from the deploy on), and a sample (from `began` on)."""
    from ray import serve

    while True:
        serve_ahead_of_the_simulation()
        if (at_s := time.time() - began) >= 0:
            states = serve.status().applications[APP].deployments[MODEL].replica_states
            running = states.get("RUNNING", 0)
            starting = sum(v for k, v in states.items() if k in ("STARTING", "PENDING_MIGRATION"))
            out.append(Sample(round(at_s, 1), running, starting, gpu_nodes_alive()))
        if stop.wait(1.0):
            return


# A node's own agents: the simulation's overhead, left at its niceness.
SIMULATION_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def serve_ahead_of_the_simulation(node_niceness: int = FakeGpuCluster.node_niceness) -> None:
    """Ray's worker processes (Serve's controller, proxy, this app's replicas) to niceness
    0, from the 15 Ray starts them at or the `node_niceness` of the simulated nodes
    (bench.surge_cluster), whose own agents then yield to the graph as they would on
    nodes of their own, with the graph's priorities among themselves unchanged. A process
    on a simulated node stays niced until it serves: its start (Ray's worker, Serve's
    replica, the engine's load) would take the head's cores, where a real node brings CPUs
    of its own. Where this process may not raise a priority (not root), they stay as Ray
    started them."""
    for proc in psutil.process_iter(["cmdline", "nice"]):
        cmdline = proc.info["cmdline"] or []
        worker = bool(cmdline) and (cmdline[0].startswith("ray::") or any("default_worker.py" in c for c in cmdline))
        if not proc.info["nice"] or not worker or cmdline[0].startswith(SIMULATION_AGENTS):
            continue
        starting = not cmdline[0].startswith("ray::ServeReplica") or ".initialize" in cmdline[0]
        if proc.info["nice"] == node_niceness and starting:
            continue
        with contextlib.suppress(psutil.Error):
            proc.nice(0)


def machine_cpu(before, after) -> dict:
    """This machine's CPU over the load: the share busy, and the CPU-seconds of niced
    processes, which here are the simulated nodes' own start-up and agents (the model
    replicas are set back to niceness 0 once they run): what a real cluster would not
    have spent on the serving graph's cores."""
    spent = {k: getattr(after, k) - getattr(before, k) for k in after._fields}
    total = sum(spent.values())
    return {
        "busy_share": round(1 - (spent["idle"] + spent.get("iowait", 0.0)) / total, 3),
        "niced_cpu_s": round(spent.get("nice", 0.0), 1),
    }


def decisions(since_unix_s: float) -> list[str]:
    """The scaling decisions in Serve's controller log since `since_unix_s`: the custom
    policy logs each change with its reason, Serve its own up- and downscaling."""
    logs = sorted((session_logs() / "serve").glob("controller_*.log"))
    wanted = re.compile(r"-> \d+ replicas|[Uu]pscaling|[Dd]ownscaling|Adding \d+ replica|Removing \d+ replica")
    stamp = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
    out = []
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            m = stamp.search(line)
            if MODEL in line and wanted.search(line) and m:
                if time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) >= since_unix_s - 1:
                    out.append(line[m.start() :][:220])
    return out


def replicas_for(model_path_per_s: float, replica_rate_per_s: float) -> int:
    """Replicas that serve a model-path rate at 80 % of their full-step rate: the capacity
    the summary's time to capacity waits for, and what an operator plans a surge on."""
    return math.ceil(model_path_per_s / (0.8 * replica_rate_per_s))


def planned_replicas(phases: tuple[Phase, ...], s: Settings, replica_rate_per_s: float) -> int:
    """What an operator who served the last promotion would plan this one on: its plateau
    at the model path's share of the mix."""
    return replicas_for(surge_multiple(phases) * s.base_rate * MODEL_PATH_SHARE, replica_rate_per_s)


def replica_rate(s: Settings, bodies: list[dict]) -> float:
    """One replica's tickets/s with full steps, at the load mix's mean prompt tokens."""
    from tokenizers import Tokenizer

    from deployments.engines.gpu_profile import GPU_E5_SMALL

    tokenizer = Tokenizer.from_file(str(DEFAULT_OUT / "tokenizer.json"))
    tokens = [len(tokenizer.encode(b["text"]).ids) for b in bodies[:2000]]
    return GPU_E5_SMALL.scaled(s.gpu_time_factor, s.gpu_ceiling_divisor).requests_per_s(
        round(sum(tokens) / len(tokens))
    )


def per_second(profile: list[tuple[float, str]], base_rate: float, out: Outcomes, samples: list[Sample]) -> list[dict]:
    n = len(profile)
    sent, refused, others = [0] * n, [0] * n, [0] * n
    for at_s, kind in out.timeline:
        k = min(int(at_s), n - 1)
        sent[k] += 1
        refused[k] += kind == "refused"
        others[k] += kind in ("lost", "hung", "unexpected")
    latencies: list[list[float]] = [[] for _ in range(n)]
    model = [0] * n
    for at_s, ms, route in zip(out.ok_at_s, out.ok_ms, out.routes):
        k = min(int(at_s), n - 1)
        latencies[k].append(ms)
        model[k] += route == "model"
    by_second = {int(s.at_s): s for s in samples}
    rows = []
    last = Sample(0, 0, 0, 0)
    for k, (multiple, phase) in enumerate(profile):
        last = by_second.get(k, last)
        rows.append(
            {
                "t_s": k,
                "phase": phase,
                "offered_per_s": round(multiple * base_rate, 1),
                "sent": sent[k],
                "answered": len(latencies[k]),
                "model_answered": model[k],
                "within_2s": sum(ms <= WITHIN_MS for ms in latencies[k]),
                "refused": refused[k],
                "failed": others[k],
                "p99_ms": percentile(latencies[k], 99, 1),
                "replicas": last.replicas,
                "starting": last.starting,
                "nodes": last.nodes,
            }
        )
    return rows


def summarize(rows: list[dict], out: Outcomes, samples: list[Sample], needed_replicas: int, surge_s: float) -> dict:
    total = max(1, out.total)
    in_phase = {
        p: [ms for at, ms in zip(out.ok_at_s, out.ok_ms) if rows[min(int(at), len(rows) - 1)]["phase"] == p]
        for p in {r["phase"] for r in rows}
    }
    ramp = in_phase.get("ramp", [])
    plateau = in_phase.get("plateau", []) + in_phase.get("peak", [])
    reached = next((s.at_s for s in samples if s.at_s >= surge_s and s.replicas >= needed_replicas), None)
    steady = [r for r in rows if r["phase"] in ("baseline", "plateau")]  # constant load
    pairs = [(a, b) for a, b in zip(steady, steady[1:]) if a["phase"] == b["phase"]]
    changes = sum(1 for a, b in pairs if a["replicas"] != b["replicas"])
    # What the policy asks for (running + starting): a replica that arrives in the plateau
    # from a decision of the ramp changes the running count, not this one.
    asked = sum(1 for a, b in pairs if a["replicas"] + a["starting"] != b["replicas"] + b["starting"])
    return {
        "tickets": out.total,
        "answered_within_2s_share": round(sum(ms <= WITHIN_MS for ms in out.ok_ms) / total, 4),
        "lost": out.counts["lost"],
        "hung": out.counts["hung"],
        "unexpected": out.counts["unexpected"],
        "refused_share": round(out.counts["refused"] / total, 4),
        # answered within the bound, but by a fallback (the pre-classifier, an expired
        # cache entry) because the model path gave up: the cost of a late capacity
        "degraded_share": round(out.counts["degraded"] / total, 4),
        "past_2s": sum(ms > WITHIN_MS for ms in out.ok_ms) + out.counts["hung"],
        "p99_baseline_ms": percentile(in_phase.get("baseline", []), 99, 1),
        "p99_ramp_ms": percentile(ramp, 99, 1),
        "p99_plateau_ms": percentile(plateau, 99, 1),
        "time_to_capacity_s": None if reached is None else round(reached - surge_s, 1),
        "max_replicas": max((s.replicas for s in samples), default=0),
        "node_seconds": sum(s.nodes for s in samples),  # one sample a second
        "replica_changes_per_min_steady": round(60 * changes / max(1, len(steady)), 2),
        "target_changes_per_min_steady": round(60 * asked / max(1, len(steady)), 2),
    }


def background_summary(out: Outcomes) -> dict:
    """Tickets that may wait: answered at all (within the client's timeout), and how late."""
    total = max(1, out.total)
    return {
        "tickets": out.total,
        "answered_share": round(out.counts["ok"] / total, 4),
        "refused_share": round(out.counts["refused"] / total, 4),
        "lost": out.counts["lost"],
        "hung": out.counts["hung"],
        "unexpected": out.counts["unexpected"],
        "past_2s": sum(ms > WITHIN_MS for ms in out.ok_ms),
        "p50_ms": percentile(out.ok_ms, 50, 1),
        "p99_ms": percentile(out.ok_ms, 99, 1),
    }


def split_rate(steps: list[tuple[float, float]], share: float) -> tuple[list, list]:
    """The profile's steps as (interactive, background) steps: `share` of each rate waits."""
    return [(r * (1 - share), d) for r, d in steps], [(r * share, d) for r, d in steps]


@dataclass(frozen=True)
class PolicyRun:
    rows: list[dict]  # per_second
    outcomes: Outcomes  # interactive tickets
    background: Outcomes  # tickets marked background (none without --background-share)
    samples: list[Sample]
    cpu: dict  # machine_cpu
    decisions: list[str]


def run_policy(policy: Policy, s: Settings, phases: tuple[Phase, ...], bodies: list[dict]) -> PolicyRun:
    import ray
    from ray import serve

    cluster = FakeGpuCluster(
        max_gpu_nodes=s.max_replicas,
        min_gpu_nodes=s.warm_nodes,
        node_start_s=s.node_start_s,
        idle_timeout_s=s.idle_timeout_s,
        haproxy=s.proxy == "haproxy",
    )
    ray_cli = Path(sys.executable).parent / "ray"
    cluster.start(ROOT, ray_cli)
    try:
        ray.init(address="auto", log_to_driver=False)
        # Warm nodes start before the graph does: their start-up is not the load's.
        deadline = time.time() + s.node_start_s + 120
        while gpu_nodes_alive() < s.warm_nodes:
            if time.time() > deadline:
                raise RuntimeError(f"{s.warm_nodes} warm GPU nodes were not up within {s.node_start_s + 120:.0f} s")
            time.sleep(1)
        serve.start(http_options={"host": "127.0.0.1", "port": PORT}, proxy_location="HeadOnly")
        profile = seconds(phases)
        url = f"http://127.0.0.1:{PORT}/"
        # The prescale schedule is bound with the graph, before the load's start is known:
        # the load starts a fixed time after the deploy, once the first GPU node and
        # replica can have started.
        ready_by_s = s.node_start_s + s.replica_start_s + 45
        began = time.time() + ready_by_s
        surge_s, surge_end_s = surge_window_s(phases)
        surge = ScheduledSurge(
            start_unix_s=began + surge_s,
            end_unix_s=began + surge_end_s,
            load_multiple=surge_multiple(phases),
            replicas=s.scheduled_replicas or None,
        )
        config = app_config(s)
        serve.run(graph(policy, s, surge, config), name=APP, route_prefix="/", blocking=False)
        while serve.status().applications[APP].status != "RUNNING":
            if time.time() > began:
                raise RuntimeError(f"{policy}: the graph was not running within {ready_by_s:.0f} s")
            time.sleep(1)
        samples: list[Sample] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(began, stop, samples), daemon=True)
        watcher.start()
        # Until then the base rate, unmeasured: caches and connections warm as on a day
        # that began before the benchmark did.
        warm_s = began - time.time() - 1
        if warm_s > 0:
            warm = ticket_bodies(int(warm_s * s.base_rate) + 1, seed=1, user_prefix="warm")
            asyncio.run(open_loop_steps(url, warm, [(s.base_rate, warm_s)], s.timeout_s, max_in_flight=4096))
        time.sleep(max(0.0, began - time.time()))
        interactive, waiting = split_rate([(m * s.base_rate, 1.0) for m, _ in profile], s.background_share)
        later = [{**b, "ticket_id": f"{b['ticket_id']}-bg", "priority": "background"} for b in bodies]

        async def both() -> tuple[list, list]:
            sends = [open_loop_steps(url, bodies, interactive, s.timeout_s, max_in_flight=4096)]
            if s.background_share:
                wait_s = max(s.timeout_s, background_budget_s(config))
                sends.append(open_loop_steps(url, later, waiting, wait_s, max_in_flight=4096))
            done = await asyncio.gather(*sends)
            return done[0], done[1] if len(done) > 1 else []

        cpu_before = psutil.cpu_times()
        done, done_later = asyncio.run(both())
        cpu = machine_cpu(cpu_before, psutil.cpu_times())
        stop.set()
        watcher.join()
        out, out_later = Outcomes(), Outcomes()
        for step in done:
            out.merge(step.outcomes)
        for step in done_later:
            out_later.merge(step.outcomes)
        # Sends are timed from open_loop_steps' own start, within milliseconds of `began`.
        rows = per_second(profile, s.base_rate * (1 - s.background_share), out, samples)
        return PolicyRun(rows, out, out_later, samples, cpu, decisions(began))
    finally:
        serve.shutdown()
        ray.shutdown()
        cluster.stop(ray_cli)


def plot(path: Path, runs: dict[str, list[dict]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    first = next(iter(runs.values()))
    axes[0].plot([r["t_s"] for r in first], [r["offered_per_s"] for r in first], "k--", label="offered")
    for name, rows in runs.items():
        t = [r["t_s"] for r in rows]
        axes[0].plot(t, [r["within_2s"] for r in rows], label=f"{name}: answered within 2 s")
        axes[1].plot(t, [r["p99_ms"] or float("nan") for r in rows], label=name)
        axes[2].step(t, [r["replicas"] for r in rows], where="post", label=f"{name}: replicas")
        axes[2].step(t, [r["nodes"] for r in rows], where="post", linestyle=":", label=f"{name}: GPU nodes")
    axes[0].set_ylabel("tickets/s (by send time)")
    axes[1].set_ylabel("P99 of answers (ms)")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("count")
    axes[2].set_xlabel("seconds since the load's start")
    for ax in axes:
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", choices=sorted(PROFILES), default="short")
    p.add_argument("--policies", default="serve,queue_latency,prescale", help="comma-separated, run in this order")
    p.add_argument("--base-rate", type=float, default=8.0, help="tickets/s at 1x")
    p.add_argument("--max-replicas", type=int, default=8)
    p.add_argument("--target-ongoing", type=int, default=3, help="model requests per replica, every policy")
    p.add_argument("--upscale-delay-s", type=float, default=5.0)
    p.add_argument("--downscale-delay-s", type=float, default=30.0)
    p.add_argument("--node-start-s", type=float, default=15.0, help="a GPU node's boot, before Ray runs on it")
    p.add_argument("--replica-start-s", type=float, default=8.0, help="the engine's start in a new replica")
    p.add_argument("--idle-timeout-s", type=float, default=30.0, help="an idle GPU node is removed after this")
    p.add_argument("--gpu-time-factor", type=float, default=48.0)
    p.add_argument("--gpu-ceiling-divisor", type=int, default=256)
    p.add_argument(
        "--timeout-s",
        type=float,
        default=40.0,
        help="client timeout: later answers count as hung (background tickets: at least the hold and a ticket's budget)",
    )
    p.add_argument(
        "--background-share", type=float, default=0.0, help="share of the rate sent as background tickets (0 to 0.9)"
    )
    p.add_argument(
        "--warm-nodes", type=int, default=0, help="GPU nodes up before the load starts, kept for the whole run"
    )
    p.add_argument(
        "--scheduled-replicas",
        type=int,
        default=0,
        help="replicas the prescale schedule plans for the surge (0: the plateau's model-path load over a replica's rate)",
    )
    p.add_argument(
        "--proxy",
        choices=get_args(Proxy),
        default="haproxy",
        help="HTTP proxy in front of the ingress: Serve's HAProxy mode (as served) or its Python proxy",
    )
    p.add_argument("--out", type=Path, default=None, help="results JSON (default bench/results/surge_PROFILE.json)")
    a = p.parse_args()
    s = Settings(**{f.name: getattr(a, f.name) for f in fields(Settings)})  # one option per field
    if not 0 <= s.background_share <= 0.9:
        p.error(f"--background-share {s.background_share}: from 0 to 0.9")
    if not 0 <= s.warm_nodes <= s.max_replicas:
        p.error(f"--warm-nodes {s.warm_nodes}: from 0 to --max-replicas ({s.max_replicas})")
    policies: list[Policy] = []
    for name in a.policies.split(","):
        if name not in get_args(Policy):
            p.error(f"--policies: unknown policy {name!r}; policies are {', '.join(get_args(Policy))}")
        policies.append(name)
    phases = PROFILES[a.profile]
    bodies = ticket_bodies(20_000, seed=7, user_prefix="surge")
    rate = replica_rate(s, bodies)
    surge_s, _ = surge_window_s(phases)
    peak = max(m for m, _ in seconds(phases)) * s.base_rate
    print(f"one replica: {rate:.1f} tickets/s with full steps; peak offered {peak:.0f}/s")
    if not s.scheduled_replicas:
        s = replace(s, scheduled_replicas=planned_replicas(phases, s, rate))
    runs, summaries, logs = {}, {}, {}
    for policy in policies:
        run = run_policy(policy, s, phases, bodies)
        rows = run.rows
        model_share = sum(r["model_answered"] for r in rows) / max(1, sum(r["answered"] for r in rows))
        needed = replicas_for(surge_multiple(phases) * s.base_rate * model_share, rate)
        runs[policy], logs[policy] = rows, run.decisions
        summaries[policy] = {
            **summarize(rows, run.outcomes, run.samples, needed, surge_s),
            "needed_replicas": needed,
            "machine_cpu": run.cpu,
        }
        if s.background_share:
            summaries[policy]["background"] = background_summary(run.background)
        print(policy, summaries[policy])
    table = print_table([{"policy": k, **v} for k, v in summaries.items()])
    path = write_results(
        (a.out.stem if a.out else f"surge_{a.profile}"),
        {
            "profile": a.profile,
            "phases": [asdict(x) for x in phases],
            "settings": asdict(s),
            "replica_rate_per_s": round(rate, 1),
            "policies": summaries,
            "decisions": logs,
            "series": runs,
            "table": table,
        },
    )
    if a.out and a.out.resolve() != path.resolve():
        a.out.write_text(path.read_text())
    plot(path.with_suffix(".png"), runs)


if __name__ == "__main__":
    main()
