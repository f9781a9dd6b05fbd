"""From the per-ticket records of a load run to stage tables, pass/fail, cost and plots.

Everything but `plot` is plain Python (the Locust process uses `overall` for its quitting
hook); `plot` imports matplotlib.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from loadkit.stats import percentile

TICKET_KINDS = ("templated", "regular", "complex")
EDGE_ROUTES = ("template", "cache", "edge_model")


@dataclass(frozen=True)
class Record:
    t_s: float  # seconds since the run started, at the answer
    kind: str  # templated, regular, complex; spam, duplicate (abuse traffic)
    status: int  # HTTP status, 0 for a connection error
    route: str
    latency_ms: float
    answered: bool
    valid: bool
    detail: str = ""  # status and error code of a refusal, or what broke the contract


def write_records(records: list[Record], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, [x.name for x in fields(Record)])
        writer.writeheader()
        writer.writerows(asdict(r) for r in records)


def read_records(path: Path) -> list[Record]:
    with open(path, newline="", encoding="utf-8") as f:
        return [
            Record(
                float(r["t_s"]),
                r["kind"],
                int(r["status"]),
                r["route"],
                float(r["latency_ms"]),
                r["answered"] == "True",
                r["valid"] == "True",
                r.get("detail", ""),
            )
            for r in csv.DictReader(f)
        ]


def summarize(records: list[Record], seconds: float) -> dict:
    """Tickets only (abuse traffic is judged apart): rates, latency of answers, errors, routes."""
    tickets = [r for r in records if r.kind in TICKET_KINDS]
    answered = [r for r in tickets if r.answered]
    latencies = [r.latency_ms for r in answered]
    model = [r.latency_ms for r in answered if r.route == "model"]
    routes = Counter(r.route for r in answered)
    edge = sum(routes[k] for k in EDGE_ROUTES)

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v, 1)

    return {
        "tickets": len(tickets),
        "answered_per_s": round(len(answered) / seconds, 2) if seconds > 0 else 0.0,
        "p50_ms": ms(percentile(latencies, 50)),
        "p99_ms": ms(percentile(latencies, 99)),
        "p999_ms": ms(percentile(latencies, 99.9)),
        "model_path_p99_ms": ms(percentile(model, 99)),
        "error_rate": round(1 - len(answered) / len(tickets), 5) if tickets else 0.0,
        "invalid": sum(not r.valid for r in records),
        "interception": round(edge / len(answered), 4) if answered else 0.0,
        # The pre-classifier's fallback while the model path is refused or failing: answered,
        # but not by the model, so peer comparisons count them apart.
        "degraded_share": round(routes["degraded"] / len(answered), 4) if answered else 0.0,
        "full_answers_per_s": round((len(answered) - routes["degraded"]) / seconds, 2) if seconds > 0 else 0.0,
        "routes": dict(routes.most_common()),
        "refusals": dict(Counter(r.detail for r in tickets if not r.answered).most_common()),
    }


def abuse(records: list[Record]) -> dict:
    """The spam user's traffic: spam must be refused; duplicates past the limit too."""
    spam = [r for r in records if r.kind == "spam"]
    duplicates = [r for r in records if r.kind == "duplicate"]
    return {
        "spam_sent": len(spam),
        "spam_let_through": sum(r.answered for r in spam),
        "duplicates_sent": len(duplicates),
        "duplicates_refused": sum(not r.answered for r in duplicates),
        "invalid": sum(not r.valid for r in spam + duplicates),
    }


def stage_users(stage_users: list[int], scale: float) -> list[int]:
    """The seeds' gradient scaled to this machine; at least one user per stage."""
    return [max(1, round(u * scale)) for u in stage_users]


def stages(records: list[Record], users: list[int], stage_s: float, settle_share: float = 0.25) -> list[dict]:
    """One summary per stage over its settled part (the first `settle_share` is ramp-up)."""
    out = []
    for i, n in enumerate(users):
        start, end = i * stage_s + settle_share * stage_s, (i + 1) * stage_s
        part = [r for r in records if start <= r.t_s < end]
        out.append({"stage": i + 1, "users": n, **summarize(part, end - start)})
    return out


def sustained(stage_rows: list[dict], slo_ms: float) -> dict:
    """The best stage whose P99 keeps the SLO: its throughput and model-path P99."""
    ok = [s for s in stage_rows if s["p99_ms"] is not None and s["p99_ms"] <= slo_ms and s["tickets"]]
    if not ok:
        return {
            "answered_per_s": 0.0,
            "full_answers_per_s": 0.0,
            "users": None,
            "p99_ms": None,
            "model_path_p99_ms": None,
        }
    best = max(ok, key=lambda s: s.get("full_answers_per_s", s["answered_per_s"]))
    keys = ("answered_per_s", "full_answers_per_s", "users", "p99_ms", "model_path_p99_ms")
    return {k: best.get(k) for k in keys}


def verdict(stage_rows: list[dict], invalid: int, judged_users: int, max_p99_ms: float, max_error_rate: float) -> dict:
    """The suite's pass criteria on every stage up to `judged_users` (the seeds judge P99 at
    1000 users, scaled; heavier stages are reported, not judged), and no contract breach."""
    checks = []
    for s in stage_rows:
        if s["users"] > judged_users:
            continue
        if not s["tickets"]:
            # Nothing answered for a whole stage is an outage, not a stage with no figures.
            checks.append(
                {"stage": s["stage"], "users": s["users"], "check": "answers", "value": 0, "limit": 1, "passed": False}
            )
            continue
        checks.append(
            {
                "stage": s["stage"],
                "users": s["users"],
                "check": "p99_ms",
                "value": s["p99_ms"],
                "limit": max_p99_ms,
                "passed": s["p99_ms"] is not None and s["p99_ms"] <= max_p99_ms,
            }
        )
        checks.append(
            {
                "stage": s["stage"],
                "users": s["users"],
                "check": "error_rate",
                "value": s["error_rate"],
                "limit": max_error_rate,
                "passed": s["error_rate"] <= max_error_rate,
            }
        )
    checks.append({"check": "invalid_responses", "value": invalid, "limit": 0, "passed": invalid == 0})
    return {"passed": all(c["passed"] for c in checks), "checks": checks}


def suite_verdict(expected: list[str], verdicts: dict[str, dict], exit_codes: dict[str, int | None]) -> dict:
    """The load suite's exit: every expected target left records and passed its verdict,
    and its load generator exited 0. A target that wrote no records fails the suite."""
    checks = []
    for target in expected:
        v = verdicts.get(target)
        checks.append({"check": f"{target} records", "passed": v is not None})
        if v is not None:
            checks.append({"check": f"{target} verdict", "passed": v["passed"]})
        code = exit_codes.get(target)
        checks.append({"check": f"{target} load generator exit code", "value": code, "passed": code == 0})
    return {"passed": all(c["passed"] for c in checks), "checks": checks}


def cost_per_million(answered_per_s: float, price_per_replica_hour: float, replicas: int = 1) -> float | None:
    """Dollars per million tickets at a sustained rate on `replicas` priced machines."""
    if answered_per_s <= 0:
        return None
    return round(price_per_replica_hour * replicas / (answered_per_s * 3600) * 1e6, 2)


def plot(runs: dict[str, list[Record]], users: list[int], stage_s: float, out_dir: Path) -> list[Path]:
    """latency.png (P50/P99 over time), latency_vs_users.png, throughput_by_route.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bucket_s = max(2.0, stage_s / 6)
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, records in runs.items():
        answered = [r for r in records if r.kind in TICKET_KINDS and r.answered]
        n_buckets = int(max((r.t_s for r in answered), default=0) // bucket_s) + 1
        groups = [[] for _ in range(n_buckets)]
        for r in answered:
            groups[int(r.t_s // bucket_s)].append(r.latency_ms)
        xs = [(i + 0.5) * bucket_s for i, g in enumerate(groups) if g]
        for ax, q in zip(axes, (50, 99)):
            ax.plot(xs, [percentile(g, q) for g in groups if g], label=name)
    for ax, q in zip(axes, (50, 99)):
        ax.set(title=f"P{q} latency of answered tickets", xlabel="seconds", ylabel="ms", yscale="log")
        for i in range(1, len(users)):
            ax.axvline(i * stage_s, color="grey", lw=0.5)
        ax.legend()
    paths.append(_save(fig, out_dir / "latency.png"))

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, records in runs.items():
        rows = stages(records, users, stage_s)
        axes[0].plot(users, [s["p99_ms"] for s in rows], marker="o", label=f"{name} P99")
        axes[0].plot(users, [s["p50_ms"] for s in rows], marker=".", ls="--", label=f"{name} P50")
        axes[1].plot(users, [s["answered_per_s"] for s in rows], marker="o", label=name)
    axes[0].set(title="Latency vs concurrent users", xlabel="users", ylabel="ms", yscale="log")
    axes[1].set(title="Answered tickets/s vs concurrent users", xlabel="users", ylabel="tickets/s")
    for ax in axes:
        ax.legend()
    paths.append(_save(fig, out_dir / "latency_vs_users.png"))

    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, (name, records) in zip(axes[0], runs.items()):
        answered = [r for r in records if r.kind in TICKET_KINDS and r.answered]
        n_buckets = int(max((r.t_s for r in answered), default=0) // bucket_s) + 1
        for route in sorted({r.route for r in answered}):
            counts = [0] * n_buckets
            for r in answered:
                if r.route == route:
                    counts[int(r.t_s // bucket_s)] += 1
            ax.plot([(i + 0.5) * bucket_s for i in range(n_buckets)], [c / bucket_s for c in counts], label=route)
        ax.set(title=f"{name}: answered tickets/s by route", xlabel="seconds", ylabel="tickets/s")
        ax.legend()
    paths.append(_save(fig, out_dir / "throughput_by_route.png"))
    return paths


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
