"""The alert rules are valid Prometheus rules and fire on their cues (promtool, from
Debian's `prometheus` package; skipped where it is missing), and every metric they read is
one the dashboard reads too, so the observability test proves it is exported."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
PROMTOOL = shutil.which("promtool") or ""
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool not installed (Debian: apt-get install prometheus)")


def metric_names(expr: str) -> set[str]:
    return {name.removesuffix("_bucket") for name in re.findall(r"\bray_[A-Za-z0-9_]+", expr)}


@needs_promtool
def test_rules_are_valid():
    done = subprocess.run([PROMTOOL, "check", "rules", "alerts.yaml"], cwd=DASHBOARDS, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_alerts_fire_on_cue_and_stay_quiet_otherwise():
    done = subprocess.run(
        [PROMTOOL, "test", "rules", "alerts.test.yaml"], cwd=DASHBOARDS, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_read_only_metrics_the_dashboard_reads():
    rules = yaml.safe_load((DASHBOARDS / "alerts.yaml").read_text())
    used = {name for group in rules["groups"] for rule in group["rules"] for name in metric_names(rule["expr"])}
    board = json.loads((DASHBOARDS / "ticketserve.json").read_text())
    shown = {name for panel in board["panels"] for t in panel["targets"] for name in metric_names(t["expr"])}
    assert used and used <= shown, sorted(used - shown)


def test_every_alert_names_a_severity_and_a_runbook():
    rules = yaml.safe_load((DASHBOARDS / "alerts.yaml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    assert len(alerts) >= 6
    for rule in alerts:
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        assert rule["annotations"]["runbook"].startswith("docs/observability.md#alerts"), rule["alert"]
