"""The people-in-the-loop settings of serve_config.yaml's `args`: the review queue, the
retrains built from it, the canary rollout that judges their candidates, and the admin
API's tokens."""

from __future__ import annotations

import os

from pydantic import Field, SecretStr

from deployments.config_base import ProjectPath, Strict
from policies.canary import CanaryConfig


class ReviewConfig(Strict):
    enabled: bool = Field(True, description="flag and record answers below min_confidence for a person to check")
    min_confidence: float | None = Field(
        None,
        ge=0,
        le=1,
        description="model and edge answers below this confidence get needs_review: true; "
        "null: the model's review_threshold (at most 5 % of right validation answers below it), else 0.5",
    )
    store_path: ProjectPath = Field(
        "var/review.sqlite3", description="SQLite file of the review queue (relative: project root); survives restarts"
    )
    record_timeout_ms: float = Field(
        1000.0, gt=0, description="after this without the review queue's answer the ticket is answered unrecorded"
    )
    retention_days: float = Field(
        90.0, gt=0, description="items recorded longer ago than this are deleted (at start, then hourly)"
    )
    audit_share: float = Field(
        0.01,
        ge=0,
        le=1,
        description="share of the answers not flagged that are recorded too, as audit items: how confident "
        "wrong answers are found (0: none)",
    )
    report_interval_s: float = Field(
        15.0, gt=0, description="how often the queue's gauges (open items, oldest age, audit estimate) are refreshed"
    )


class RetrainConfig(Strict):
    enabled: bool = Field(True, description="POST /admin/retrain builds a candidate from the resolved review items")
    candidates_dir: ProjectPath = Field(
        "artifacts/models/candidates",
        description="where candidates are built, one directory each (relative: project root; shared with the replicas)",
    )
    state_path: ProjectPath = Field(
        "var/retrain.json", description="the retrains' record (relative: project root); survives restarts"
    )
    epochs: int = Field(1, ge=1, description="passes over the training rows, warm-started from the serving model")
    reviewed_share: float = Field(
        0.2, gt=0, lt=1, description="share of resolved items never trained on: the candidate's reviewed set"
    )
    replay_rows: int = Field(
        0, ge=0, description="rows the serving model was built from, trained again beside the reviews; 0: all of them"
    )
    review_weight: int = Field(2, ge=1, description="times each resolved item counts in training")
    num_cpus: float = Field(1.0, gt=0, description="Ray CPUs the retrain task reserves (its own, not a replica's)")
    torch_threads: int = Field(1, ge=1, description="threads the retrain computes on: the rest stay the graph's")
    niceness: int = Field(10, ge=0, le=19, description="the retrain's CPU priority below the graph's (Unix nice)")
    publish_to_canary: bool = Field(
        False,
        description="a finished candidate becomes the canary: rollout.canary_model_dir (a link, models/registry.py) "
        "is pointed at it, and the canary controller starts its rollout",
    )


class RolloutConfig(Strict):
    canary_model_dir: ProjectPath | None = Field(
        None, description="model of the canary side, served next to model.engine.model_dir (stable); null: no canary"
    )
    shadow: bool = Field(
        False, description="the canary answers a copy of its share of tickets; stable answers are returned"
    )
    policy: CanaryConfig = Field(default_factory=CanaryConfig, description="split, judging thresholds and steps")
    judge_interval_s: float = Field(5.0, gt=0, description="how often the controller judges the canary")
    promote_to_stable: bool = Field(
        False,
        description="a complete rollout makes the canary's model stable by moving the aliases (model.engine.model_dir "
        "and canary_model_dir must be links, models/registry.py); false: an operator's edit",
    )
    golden_file: ProjectPath = Field(
        "models/data/golden.csv", description="golden set both sides answer before the canary is judged"
    )
    golden_tickets: int = Field(
        0, ge=0, description="golden tickets asked per comparison, spread evenly over the file; 0: all"
    )
    sync_interval_ms: float = Field(
        500.0, gt=0, description="callers fetch the split and send their answer counts this often, in one call"
    )
    call_timeout_ms: float = Field(
        1000.0, gt=0, description="after this without the controller's answer callers send every ticket to stable"
    )
    state_path: ProjectPath = Field(
        "var/canary.json", description="where the rollout's share, status and history survive a controller restart"
    )


class AdminConfig(Strict):
    token: SecretStr | None = Field(
        None, description="bearer token of the /admin API; prefer token_env (config files end up in logs and repos)"
    )
    token_env: str = Field(
        "TICKETSERVE_ADMIN_TOKEN", description="environment variable (of the ingress replicas) holding the token"
    )
    reviewer_token: SecretStr | None = Field(
        None,
        description="bearer token that may list and resolve review items and nothing else; prefer reviewer_token_env",
    )
    reviewer_token_env: str = Field(
        "TICKETSERVE_REVIEWER_TOKEN",
        description="environment variable (of the ingress replicas) holding the reviewer token",
    )

    def resolved_token(self) -> str | None:
        """The token from config, else from the environment; None: every admin call is 401."""
        return _secret(self.token, self.token_env)

    def resolved_reviewer_token(self) -> str | None:
        """The reviewer token from config, else from the environment; None: no reviewer role."""
        return _secret(self.reviewer_token, self.reviewer_token_env)


def _secret(value: SecretStr | None, env: str) -> str | None:
    if value is not None:
        return value.get_secret_value()
    return os.environ.get(env) or None
