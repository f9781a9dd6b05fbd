"""The results page, docs/results.md, generated from the published results in
docs/results/*.json, so that a figure has one source and the docs link to it.

    python -m bench.results_page                     # write docs/results.md
    python -m bench.results_page --check             # exit 1 where the page is not what the results give
    python -m bench.results_page publish bench/results/loop.json --name loop-bitext --kind loop \\
        --title "The review loop on Bitext"          # copy a result in (its `run` stamp kept), then write

A benchmark writes its result with a `run` stamp (bench/stamp.py: command, UTC time,
commit, machine) under bench/results/ (not in git); publishing copies the ones the docs
quote into docs/results/. A result written before stamps existed is published with the
stamp given on the command line (--command, --utc, --commit, --machine), or not at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import markdown_table
from bench.stamp import ROOT, RunStamp

PUBLISHED = ROOT / "docs" / "results"
PAGE = ROOT / "docs" / "results.md"


@dataclass(frozen=True)
class Published:
    name: str  # the section's anchor
    kind: str  # which renderer reads `result`
    title: str
    run: RunStamp
    result: dict

    @classmethod
    def read(cls, path: Path) -> Published:
        data = json.loads(path.read_text())
        return cls(path.stem, data["kind"], data["title"], RunStamp(**data["run"]), data["result"])


def share(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def render_golden(result: dict) -> list[str]:
    lines = [
        f"{result['answered']} of {result['tickets']} tickets answered; accuracy **{result['accuracy']:.3f}**; "
        f"route as expected {result['route_agreement']:.3f}.",
        "",
    ]
    lines += markdown_table(
        ["language", "tickets", "accuracy"],
        [[k, str(v["n"]), share(v["accuracy"])] for k, v in result["by_lang"].items()],
    )
    lines += [""] + markdown_table(
        ["case", "tickets", "accuracy"], [[k, str(v["n"]), share(v["accuracy"])] for k, v in result["by_case"].items()]
    )
    return lines


def render_loop(result: dict) -> list[str]:
    offline = result.get("offline")
    random_rows = {r["round"]: r["accuracy"] for r in offline["random"]} if offline else {}
    header = ["round", "model", "test accuracy", "right flagged", "wrong unflagged", "stream flagged"]
    header += ["reviewed + audited", "retrain", "verdict"] + (["random rows, offline"] if offline else [])
    rows = []
    for r in result["rounds"]:
        row = [
            str(r["round"]),
            r["model_version"],
            share(r["test_accuracy"]),
            share(r["test_flagged_right_share"]),
            share(r["test_wrong_unflagged_share"]),
            share(r["stream_flagged_share"]),
            f"{r['reviewed']} + {r['audited']}" if r["round"] else "–",
            f"{r['retrain_s']:.0f} s" if r["retrain_s"] is not None else "–",
            r["verdict"] or "–",
        ]
        rows.append(row + ([share(random_rows.get(r["round"]))] if offline else []))
    lines = [f"{result['test_tickets']} test tickets, served through the graph.", ""] + markdown_table(header, rows)
    if result.get("poisoned"):
        p = result["poisoned"]
        lines += ["", f"Poisoned round {p['round']}: {p['verdict']}, {p['live_answers']} live answers."]
    if offline:
        how = f" (`{offline['run']['command']}`)" if "run" in offline else ""
        lines += ["", f"Random rows: as many labelled rows drawn at random, built and judged offline{how}."]
    return lines


def render_retrain_p99(result: dict) -> list[str]:
    rows = [
        [name, str(p["answered"]), str(p["failed"]), f"{p['p50_ms']:.1f} ms", f"{p['p99_ms']:.1f} ms"]
        for name, p in (("idle", result["idle"]), ("during the retrain", result["during_retrain"]))
    ]
    retrain = result["retrain"]
    return [
        f"{result['rate_per_s']:g} tickets/s, open loop. The retrain: {retrain['status']} in "
        f"{retrain['seconds']:.0f} s. P99 during / idle: **{result['p99_ratio']}**.",
        "",
        *markdown_table(["phase", "answered", "failed", "P50", "P99"], rows),
    ]


def render_cpu_split(result: dict) -> list[str]:
    """bench.cpu_split: the load's figures, then the CPU per process over the measured run."""
    total_s = sum(p["cpu_s"] for p in result["processes"])
    per_ticket = [
        [p["name"].strip(), f"{p['cpu_s']:.1f} s", f"{1000 * p['cpu_s'] / result['requests']:.1f}"]
        for p in result["processes"][:8]
    ]
    return [
        f"Engine {result['engine']}, edge answers {'on' if result['edge'] else 'off'}, "
        f"{result.get('proxy', 'python')} proxy, micro-batched model calls "
        f"{'on' if result.get('micro_batch') else 'off'}: {result['users']} "
        f"closed-loop users, {result['req_per_s']:g} tickets/s, P50 {result['p50_ms']:.0f} ms, P99 "
        f"{result['p99_ms']:.0f} ms, {result['errors']} errors. **{result['cpu_ms_per_request']:.1f} CPU-ms per "
        f"ticket** in all ({total_s:.1f} CPU-s in the top {len(result['processes'])} processes).",
        "",
        *markdown_table(["process", "CPU", "CPU-ms per ticket"], per_ticket),
    ]


def render_quality(result: dict) -> list[str]:
    """bench.quality: per served model, the golden set, out-of-scope text and Bitext."""
    blocks: list[list[str]] = []
    for name, m in result.items():
        golden = m["golden"]
        flags = m["golden_flags_by_lang"]
        lines = [
            f"### {name}: `{m['model_version']}`",
            "",
            f"Review threshold {m['review_threshold']}; served ECE {m['served_ece']} over "
            f"{m['served_answers_judged']} answers; {m['served_cpu'].get('cpu_ms_per_ticket')} CPU-ms per "
            "model-path ticket.",
            "",
        ]
        rows = [["all", str(golden["answered"]), share(golden["accuracy"]), share(m["golden_right_flagged"]), "–"]]
        rows += [
            [
                lang,
                str(v["n"]),
                share(v["accuracy"]),
                share(flags[lang]["right_flagged"]),
                share(flags[lang]["wrong_unflagged"]),
            ]
            for lang, v in golden["by_lang"].items()
        ]
        lines += ["Golden set:", ""] + markdown_table(
            ["language", "tickets", "accuracy", "right flagged", "wrong unflagged"], rows
        )
        rows = [
            [oos_set, str(v["n"]), share(v["labelled_out_of_scope"]), share(v["flagged"])]
            for oos_set, v in m["out_of_scope"].items()
        ]
        lines += ["", "Out-of-scope text:", ""] + markdown_table(
            ["set", "tickets", "answered out_of_scope", "flagged"], rows
        )
        if "bitext" in m:
            bitext = m["bitext"]
            rows = [
                [route, str(v["n"]), share(v["accuracy"]), share(v["right_flagged"]), share(v["wrong_unflagged"])]
                for route, v in {"all": bitext["all"], **bitext["by_route"]}.items()
            ]
            lines += ["", "Bitext (English, written by others), by route:", ""]
            lines += markdown_table(["route", "tickets", "accuracy", "right flagged", "wrong unflagged"], rows)
        blocks.append(lines)
    return [line for i, block in enumerate(blocks) for line in ([""] if i else []) + block]


Column = tuple[str, str, Callable[[Any], str]]  # header, key, format


def ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f} ms"


def by_policy(cols: list[Column], policies: dict[str, dict]) -> list[str]:
    """One row per policy, one column per (header, key, format)."""
    rows = [[name] + [fmt(p.get(key)) for _, key, fmt in cols] for name, p in policies.items()]
    return markdown_table(["policy"] + [c for c, _, _ in cols], rows)


def render_surge(result: dict) -> list[str]:
    """bench.surge: one row per autoscaling policy, same profile, same run."""
    s = result["settings"]
    phases = ", ".join(f"{p['name']} {p['seconds']} s" for p in result["phases"])
    lines = [
        f"Profile `{result['profile']}` ({phases}) at {s['base_rate']:g} tickets/s × 1; a GPU node starts in "
        f"{s['node_start_s']:g} s, a replica's engine in {s['replica_start_s']:g} s more; one replica serves "
        f"{result['replica_rate_per_s']} tickets/s with full steps; 1-{s['max_replicas']} replicas, target "
        f"{s['target_ongoing']} requests each"
        + (f"; {s['warm_nodes']} GPU nodes up before the load" if s.get("warm_nodes") else "")
        + (f"; the schedule plans {s['scheduled_replicas']} replicas" if s.get("scheduled_replicas") else "")
        + ("; Serve's HAProxy mode in front." if s.get("proxy") == "haproxy" else "; Serve's Python proxy in front."),
        "",
    ]
    cols: list[Column] = [
        ("answered within 2 s", "answered_within_2s_share", share),
        ("refused", "refused_share", share),
        ("degraded", "degraded_share", share),
        ("lost", "lost", str),
        ("hung", "hung", str),
        ("P99 baseline", "p99_baseline_ms", ms),
        ("P99 ramp", "p99_ramp_ms", ms),
        ("P99 plateau", "p99_plateau_ms", ms),
        ("to capacity", "time_to_capacity_s", lambda v: "never" if v is None else f"{v:.0f} s"),
        ("node-seconds", "node_seconds", str),
        ("changes/min steady: running", "replica_changes_per_min_steady", str),
        ("asked for", "target_changes_per_min_steady", lambda v: "–" if v is None else str(v)),
    ]
    lines += by_policy(cols, result["policies"])
    waiting = {name: p["background"] for name, p in result["policies"].items() if "background" in p}
    if not waiting:
        return lines
    cols = [
        ("tickets", "tickets", str),
        ("answered", "answered_share", share),
        ("refused", "refused_share", share),
        ("lost", "lost", str),
        ("hung", "hung", str),
        ("answered past 2 s", "past_2s", str),
        ("P50", "p50_ms", ms),
        ("P99", "p99_ms", ms),
    ]
    return [
        *lines,
        "",
        f"The table above counts the interactive tickets; {s['background_share']:.0%} of the rate was sent as "
        '`"priority": "background"`, held by the ingress for capacity instead of refused:',
        "",
        *by_policy(cols, waiting),
    ]


RENDERERS: dict[str, Callable[[dict], list[str]]] = {
    "surge": render_surge,
    "quality": render_quality,
    "golden": render_golden,
    "loop": render_loop,
    "retrain_p99": render_retrain_p99,
    "cpu_split": render_cpu_split,
}


def render(published: list[Published]) -> str:
    lines = [
        "# Results",
        "",
        "Generated by `python -m bench.results_page` from `docs/results/*.json`; edit those (with",
        "`python -m bench.results_page publish`), not this page. Each section names the command,",
        "date, commit and machine of its run.",
    ]
    for p in sorted(published, key=lambda p: p.name):
        lines += ["", f'<a id="{p.name}"></a>', f"## {p.title}", ""]
        lines += [f"`{p.run.command}` · {p.run.utc[:10]} · commit {p.run.commit} · {p.run.machine}", ""]
        lines += RENDERERS[p.kind](p.result)
    return "\n".join(lines) + "\n"


def read_all(folder: Path = PUBLISHED) -> list[Published]:
    return [Published.read(path) for path in sorted(folder.glob("*.json"))]


def publish(source: Path, name: str, kind: str, title: str, given: RunStamp | None, folder: Path = PUBLISHED) -> Path:
    data = json.loads(source.read_text())
    run = data.pop("run", None)
    if run is None:
        if given is None:
            raise SystemExit(f"{source} has no `run` stamp: give --command, --utc, --commit and --machine")
        run = asdict(given)
    if kind not in RENDERERS:
        raise SystemExit(f"unknown kind {kind!r}; kinds are {', '.join(RENDERERS)}")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}.json"
    out.write_text(json.dumps({"kind": kind, "title": title, "run": run, "result": data}, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 where docs/results.md differs from its results")
    sub = p.add_subparsers(dest="action")
    pub = sub.add_parser("publish", help="copy a result into docs/results/, then write the page")
    pub.add_argument("source", type=Path)
    pub.add_argument("--name", required=True, help="its file name and the section's anchor")
    pub.add_argument("--kind", required=True, choices=sorted(RENDERERS))
    pub.add_argument("--title", required=True)
    for field in ("command", "utc", "commit", "machine"):
        pub.add_argument(f"--{field}", help="the run's, for a result written without a stamp")
    a = p.parse_args(argv)
    if a.action == "publish":
        stamp = (a.command, a.utc, a.commit, a.machine)
        given = RunStamp(*stamp) if all(stamp) else None
        print(f"published {publish(a.source, a.name, a.kind, a.title, given)}")
    page = render(read_all())
    if a.check:
        if not PAGE.is_file() or PAGE.read_text() != page:
            print(f"{PAGE} is not what docs/results/ gives: run python -m bench.results_page", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
