"""bench.surge's pure parts: the profile's seconds, each policy's Serve config, the
cluster's autoscaler config, and the summary of a run's outcomes."""

import pytest
from ray.serve.config import AutoscalingConfig

from bench.surge import (
    PROFILES,
    Phase,
    Sample,
    Settings,
    app_config,
    autoscaling,
    background_budget_s,
    background_summary,
    per_second,
    planned_replicas,
    replicas_for,
    seconds,
    split_rate,
    summarize,
    surge_multiple,
    surge_window_s,
)
from bench.surge_cluster import GPU_NODE, FakeGpuCluster
from deployments.config import AppConfig
from deployments.control.autoscaling import QueueLatencyPolicy
from loadkit.generators import Outcomes
from loadkit.graph_args import shipped_args
from policies.prescale import ScheduledSurge

SETTINGS = Settings(
    base_rate=10,
    max_replicas=6,
    target_ongoing=4,
    upscale_delay_s=5,
    downscale_delay_s=30,
    node_start_s=15,
    replica_start_s=8,
    idle_timeout_s=30,
    gpu_time_factor=24,
    gpu_ceiling_divisor=256,
    timeout_s=40,
    background_share=0.2,
)
PHASES = (Phase("baseline", 2, 1, 1), Phase("ramp", 2, 1, 10), Phase("plateau", 2, 10, 10), Phase("after", 2, 1, 1))


def test_the_profile_is_a_rate_per_second_and_the_surge_has_a_window():
    assert seconds(PHASES) == [
        (1, "baseline"),
        (1, "baseline"),
        (pytest.approx(3.25), "ramp"),
        (pytest.approx(7.75), "ramp"),
        (10, "plateau"),
        (10, "plateau"),
        (1, "after"),
        (1, "after"),
    ]
    assert surge_window_s(PHASES) == (2.0, 6.0)
    assert surge_multiple(PHASES) == surge_multiple(PROFILES["promo"]) == 10  # the promo's 12.7 peak is short
    short = seconds(PROFILES["short"])
    assert max(m for m, _ in short) == 10 and len(short) <= 200
    assert max(m for m, _ in seconds(PROFILES["promo"])) == pytest.approx(12.7)


def test_a_surge_is_planned_on_its_plateaus_model_path_load_at_80_percent_of_a_replica():
    assert replicas_for(48, 15) == 4 and replicas_for(48.1, 15) == 5
    # 10x of 10/s, 70 % of it on the model path: 70/s over 12/s per replica.
    assert planned_replicas(PHASES, SETTINGS, 15) == 6


@pytest.mark.parametrize("policy", ["serve", "queue_latency", "prescale"])
def test_each_policy_is_a_valid_serve_config_with_the_same_bounds(policy):
    planned = ScheduledSurge(start_unix_s=1000.0, end_unix_s=2000.0, load_multiple=10, replicas=5)
    config = autoscaling(policy, SETTINGS, planned)
    parsed = AutoscalingConfig(**config)
    assert (parsed.min_replicas, parsed.max_replicas, parsed.upscale_delay_s) == (1, 6, 5)
    if policy == "serve":
        assert "policy" not in config
        return
    kwargs = config["policy"]["policy_kwargs"]
    QueueLatencyPolicy(**kwargs)  # Serve builds it from these
    if policy == "prescale":
        surge = kwargs["prescale"]["schedule"][0]
        assert (surge["start_unix_s"], surge["end_unix_s"], surge["load_multiple"]) == (1000.0, 2000.0, 10)
        assert surge["replicas"] == 5
        # replicas asked for early enough to be serving when the surge starts
        assert kwargs["prescale"]["lead_s"] > SETTINGS.node_start_s + SETTINGS.replica_start_s


def test_gpu_nodes_are_the_only_ones_the_autoscaler_adds_and_they_start_late():
    config = FakeGpuCluster(max_gpu_nodes=5, node_start_s=12).config()
    assert config["available_node_types"][GPU_NODE]["resources"]["GPU"] == 1
    assert config["available_node_types"][GPU_NODE]["max_workers"] == 5
    assert config["provider"]["node_start_s"] == 12 and config["provider"]["launch_multiple"]
    assert config["available_node_types"]["ray.head.default"]["max_workers"] == 0
    assert config["available_node_types"][GPU_NODE]["min_workers"] == 0
    warm = FakeGpuCluster(max_gpu_nodes=5, min_gpu_nodes=3).config()
    assert warm["available_node_types"][GPU_NODE]["min_workers"] == 3


def test_a_runs_outcomes_become_series_and_a_summary():
    out = Outcomes()
    answer = '{"route": "model", "model_version": "v"}'
    for t in range(8):
        out.add("ok", t + 0.1, 200, 100.0, note=answer)
    out.add("ok", 3.2, 200, 2500.0, note='{"route": "degraded", "degraded": true}')  # ramp, past 2 s, a fallback
    out.add("refused", 3.3, 503, 5.0)
    out.add("hung", 4.5)
    samples = [Sample(float(t), replicas, 0, replicas) for t, replicas in enumerate([1, 1, 1, 2, 3, 3, 3, 1])]
    rows = per_second(seconds(PHASES), 10, out, samples)
    assert [r["answered"] for r in rows] == [1, 1, 1, 2, 1, 1, 1, 1]
    assert rows[3]["within_2s"] == 1 and rows[3]["refused"] == 1 and rows[4]["failed"] == 1
    assert [r["replicas"] for r in rows] == [1, 1, 1, 2, 3, 3, 3, 1]
    summary = summarize(rows, out, samples, needed_replicas=3, surge_s=2.0)
    assert summary["tickets"] == 11
    assert summary["answered_within_2s_share"] == pytest.approx(8 / 11, abs=1e-4)
    assert (summary["hung"], summary["lost"], summary["past_2s"]) == (1, 0, 2)
    assert summary["refused_share"] == summary["degraded_share"] == pytest.approx(1 / 11, abs=1e-4)
    assert summary["time_to_capacity_s"] == 2.0  # 3 replicas from t=4, the surge began at 2
    assert summary["p99_ramp_ms"] == 2500.0 and summary["p99_plateau_ms"] == 100.0
    assert summary["node_seconds"] == 15
    # constant load: 1 -> 1 in the baseline, 3 -> 3 on the plateau; the scale-down after is no flapping
    assert summary["replica_changes_per_min_steady"] == 0
    samples[5] = Sample(5.0, 2, 0, 2)
    flapping = summarize(per_second(seconds(PHASES), 10, out, samples), out, samples, 3, 2.0)
    assert flapping["replica_changes_per_min_steady"] == 15.0  # one change in 4 steady seconds
    assert flapping["target_changes_per_min_steady"] == 15.0
    # a replica asked for in the ramp arrives on the plateau: the running count changes, the asked-for one does not
    arriving = [Sample(float(t), r, s, r + s) for t, (r, s) in enumerate([(1, 0)] * 3 + [(2, 1)] * 2 + [(3, 0)] * 2)]
    late = summarize(per_second(seconds(PHASES), 10, out, arriving), out, arriving, 3, 2.0)
    assert late["replica_changes_per_min_steady"] == 15.0 and late["target_changes_per_min_steady"] == 0


def test_background_tickets_take_their_share_of_every_second_and_are_judged_apart():
    interactive, waiting = split_rate([(10.0, 1.0), (100.0, 1.0)], 0.2)
    assert interactive == [(8.0, 1.0), (80.0, 1.0)] and waiting == [(2.0, 1.0), (20.0, 1.0)]
    out = Outcomes()
    out.add("ok", 0.5, 200, 300.0, '{"route": "model"}')
    out.add("ok", 1.5, 200, 9000.0, '{"route": "model"}')  # held for capacity: late, answered
    out.add("refused", 2.0, 503, 20000.0)
    out.add("hung", 3.0)
    summary = background_summary(out)
    assert summary["tickets"] == 4 and summary["answered_share"] == 0.5 and summary["refused_share"] == 0.25
    assert summary["past_2s"] == 1 and summary["hung"] == 1 and summary["p99_ms"] == 9000.0


def test_a_background_ticket_counts_as_hung_only_past_what_the_api_tells_its_caller():
    config = app_config(SETTINGS)
    shipped = AppConfig.from_args(shipped_args())
    assert config.ingress == shipped.ingress  # the surge's graph keeps the shipped ingress
    assert background_budget_s(config) == shipped.ingress.background.max_wait_s + shipped.ingress.request_timeout_s
    assert background_budget_s(config) > SETTINGS.timeout_s


def test_the_surge_calls_its_gpu_replicas_as_the_gpu_config_does():
    config = app_config(SETTINGS)
    gpu = AppConfig.from_args(shipped_args("serve_config.gpu.yaml"))
    assert config.micro_batch == gpu.micro_batch and config.micro_batch.enabled
    assert config.model.engine.mode == "fake"
