"""Candidates to live without an edit of the config, on a real graph whose model
directories are aliases (models/registry.py): pointing the candidate alias at a new
model starts its rollout in shadow; a bad one is rolled back there with no answer of
it ever sent; a good one goes live by policy, completes, and becomes stable by the
aliases moving (Serve replaces the replicas); the old stable is one action away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from models import registry
from models.variant import derive
from tests.graph.test_canary import AUTH, TEXTS, rollout, rollout_args, wait_for
from tests.harness import running

pytestmark = pytest.mark.rollout

POLICY = {
    "min_compared": 20,
    "min_canary_answers": 5,
    "min_p99_answers": 5,
    "hold_s": 1,
    "max_p99_ratio": 10,
    "start_percent": 50,
    "step_percent": 50,
    "shadow_goes_live": True,
}
# A replica whose alias moved fails its next health check: checked every second here.
FAST_HEALTH = {
    name: {"health_check_period_s": 1, "graceful_shutdown_timeout_s": 1}
    for name in ("ModelReplica", "CanaryModelReplica")
}


@pytest.fixture(scope="module")
def aliases(default_model_dir, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("aliases")
    derive(Path(default_model_dir), out / "builds" / "shuffled", shuffle_seed=2)
    derive(Path(default_model_dir), out / "builds" / "good")
    for alias in ("stable", "candidate"):
        registry.point(out / alias, default_model_dir)
    return {
        "stable": out / "stable",
        "candidate": out / "candidate",
        "shuffled": out / "builds" / "shuffled",
        "good": out / "builds" / "good",
    }


def answer_versions(client, tag: str, n: int = 8, strict: bool = True) -> list[str]:
    """The versions that answered `n` new tickets; `strict: False` skips refusals (a
    stable side between two replicas)."""
    versions = []
    for i in range(n):
        r = client.post("/v1/classify", json={"text": f"{TEXTS[i % 4]} ({tag} {i})", "ticket_id": f"{tag}-{i}"})
        if r.status_code != 200 and not strict:
            continue
        assert r.status_code == 200, r.text
        versions.append(r.json()["model_version"])
    return versions


def test_a_candidate_goes_from_its_alias_to_stable_and_back(ray_serve, default_model_dir, aliases, tmp_path):
    args = rollout_args(
        str(aliases["stable"]),
        aliases["candidate"],
        tmp_path / "canary.json",
        shadow=True,
        promote_to_stable=True,
        policy=POLICY,
    )
    with running(ray_serve, "aliased", args, FAST_HEALTH) as client:
        state = rollout(client)
        default = state["stable_version"]
        assert state["status"] == "none" and state["aliases"]["candidate"] == str(Path(default_model_dir).resolve())

        # A bad candidate: judged in shadow, rolled back; no customer got one of its answers.
        registry.point(aliases["candidate"], aliases["shuffled"])
        seen: list[str] = []
        state = wait_for(
            client,
            lambda s: s["status"] == "rolled_back" and "shuffled" in (s["canary_version"] or ""),
            timeout_s=90,
            drive=lambda: seen.extend(answer_versions(client, f"bad-{len(seen)}", 2)),
        )
        assert "golden accuracy" in state["history"][-1]["reason"]
        assert set(seen) == {default}

        # A good one: shadow, live by policy, complete, then stable by the aliases moving.
        registry.point(aliases["candidate"], aliases["good"])
        state = wait_for(
            client,
            lambda s: s["status"] == "none" and "good" in s["stable_version"],
            timeout_s=150,
            drive=lambda: answer_versions(client, f"good-{time.monotonic()}", 2),
        )
        good = state["stable_version"]
        actions = [h["action"] for h in state["history"]]
        assert actions[-5:] == ["new_canary", "promote", "promote", "complete", "stable"], state["history"]
        assert "live at 50 %" in state["history"][-4]["reason"]
        assert state["aliases"] == {
            "stable": str(aliases["good"].resolve()),
            "previous": str(Path(default_model_dir).resolve()),
            "candidate": str(aliases["good"].resolve()),
        }
        assert set(answer_versions(client, "after")) == {good}

        # The old stable model is one action away.
        restored = client.post("/admin/models/restore", headers=AUTH)
        assert restored.status_code == 200, restored.text
        deadline = time.monotonic() + 60
        while set(answer_versions(client, f"restored-{time.monotonic()}", 4, strict=False)) != {default}:
            assert time.monotonic() < deadline, "stable not back on the previous model"
            time.sleep(1)
        assert registry.target(aliases["stable"]) == Path(default_model_dir).resolve()
