"""Blue-green model sides: the canary controller (one actor). Its callers' side is
deployments/callers/canary_view.py; the state machine is policies/rollout.py.

The controller owns the rollout: the canary's share of tickets, shadow mode, and the
judge (policies.canary) that rolls the canary back or promotes it. A canary retrained
from reviews brings its reviewed set, which both sides answer with the golden set. It learns the live
figures from the model path's views, which send what they saw in one call per
`sync_interval_ms` and get the split back, and asks the golden set of both sides itself.
It also owns the result caches' epoch: a bump makes every edge router drop its cache,
which is how a rollback (or an operator's flush) reaches every replica.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.api import NoCanary
from deployments.config_loop import RolloutConfig
from deployments.metrics.held_gauge import HeldGauge
from deployments.nodes.canary_evidence import LiveFigures, accuracy, ask_both, golden_sample, reviewed_set
from deployments.nodes.state_file import load_json, save_json
from models import registry
from models.golden import GoldenItem, load
from policies.canary import COLORS, Decision, Side, judge
from policies.rollout import Change, Rollout, Split, SyncReport

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "CanaryController",
    "num_replicas": 1,
    "max_ongoing_requests": 1024,
    "ray_actor_options": {"num_cpus": 0},
}


class CanaryController:
    async def __init__(
        self,
        config: RolloutConfig,
        stable: DeploymentHandle | str,
        canary: DeploymentHandle | None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        judge_loop: bool = True,
        stable_model_dir: str | None = None,
    ):
        self._config = config
        self._stable_model_dir = stable_model_dir
        if isinstance(stable, str):
            # Colocated: the stable model answers inside the ingress, which binds this
            # controller; a handle bound here would be a cycle, so it is looked up by name.
            stable = serve.get_deployment_handle(stable, serve.get_replica_context().app_name)
        self._stable, self._canary = stable, canary
        self._clock, self._wall = clock, wall_clock
        self._versions: dict[Side, str | None] = {
            "stable": (await stable.labels.remote())["model_version"],
            "canary": (await canary.labels.remote())["model_version"] if canary is not None else None,
        }
        self._golden_items = golden_sample(load(Path(config.golden_file)), config.golden_tickets)
        self._reviewed_items = reviewed_set(config.canary_model_dir)
        self._golden: dict[str, Any] | None = None
        self._totals = collections.Counter[str]()
        # A canary side serving the stable model has nothing to roll out.
        rolled = self._versions["canary"] if self._versions["canary"] != self._versions["stable"] else None
        self._rollout = Rollout(rolled, config.policy.start_percent, config.shadow, clock())
        if (saved := self._load()) is not None:
            self._rollout.restore(saved)
        self._started = clock()
        self._live = LiveFigures()
        self._percent_gauge = HeldGauge(
            "canary_percent", description="Share of tickets routed to the canary side, 0-100."
        )
        self._decisions = Counter(
            "canary_decisions_total",
            description="Rollout changes by action: rollback, promote, complete (judge or operator).",
            tag_keys=("action",),
        )
        self._golden_accuracy = HeldGauge(
            "canary_golden_accuracy", description="Golden-set accuracy of each model side.", tag_keys=("side",)
        )
        self._percent_gauge.set(self._rollout.percent)
        self._loop = asyncio.get_running_loop().create_task(self._judge_loop()) if judge_loop and canary else None

    # --- callers ---

    def sync(self, report: SyncReport) -> Split:
        """A view's figures since its last sync; answers the split it must apply now.
        Figures gathered under an older split are dropped: they belong to another share."""
        if report.generation == self._rollout.generation:
            self._live.add(report)
        self._totals.update(
            canary_errors=report.canary_errors,
            compared=report.compared,
            agreed=report.agreed,
            stable_answers=len(report.stable_ms),
            canary_answers=len(report.canary_ms),
        )
        return self._rollout.split()

    # --- operators (the /admin API) ---

    def state(self) -> dict[str, Any]:
        stats = self._live.stats(self._golden or {})
        now = self._clock()
        return {
            **dataclasses.asdict(self._rollout.split()),
            "stable_version": self._versions["stable"],
            "since_s": round(now - self._rollout.since, 1),
            "uptime_s": round(now - self._started, 1),
            "live": {k: v for k, v in vars(stats).items() if not k.startswith("golden")},
            "golden": self._golden,
            "totals": dict(self._totals),
            "history": [dataclasses.asdict(c) for c in self._rollout.history],
            "aliases": self._aliases(),
        }

    def _aliases(self) -> dict[str, str] | None:
        """What the model aliases name now; None where the sides' directories are not aliases."""
        stable = self._stable_model_dir
        if not (stable and Path(stable).is_symlink()):
            return None
        links = {"stable": Path(stable), "previous": registry.previous_link(stable)}
        if self._config.canary_model_dir:
            links["candidate"] = Path(self._config.canary_model_dir)
        return {name: str(registry.target(link)) for name, link in links.items() if link.is_symlink()}

    def set_split(self, percent: float | None = None, shadow: bool | None = None) -> dict[str, Any]:
        self._require_canary()
        self._changed(self._rollout.set_split(percent, shadow, self._clock(), self._wall()))
        return self.state()

    def promote(self) -> dict[str, Any]:
        """One step now, without waiting for the hold time or the samples."""
        self._require_canary()
        step = self._config.policy.step_percent
        self._changed(self._rollout.promote(step, "operator", self._clock(), self._wall()))
        return self.state()

    def rollback(self, reason: str = "operator") -> dict[str, Any]:
        self._require_canary()
        self._changed(self._rollout.rollback(reason, self._clock(), self._wall()))
        return self.state()

    def flush_caches(self) -> dict[str, Any]:
        """Every edge router drops its result cache at its next sync."""
        return {"epoch": self._rollout.flush_caches(), "applies_within_ms": self._config.sync_interval_ms}

    async def ping(self) -> str:
        return "ok"

    # --- judging ---

    async def judge_once(self) -> Decision | None:
        if not self._rollout.judged:
            return None
        if self._golden is None or self._golden["versions"] != self._versions:
            self._golden = await self._ask_golden()
        r = self._rollout
        policy = self._config.policy
        decision = judge(policy, self._live.stats(self._golden or {}), r.percent, r.since, self._clock())
        live = policy.start_percent if policy.shadow_goes_live else None
        decision, change = r.apply(decision, self._clock(), self._wall(), live)
        self._changed(change)
        if change is not None and change.action == "complete" and self._config.promote_to_stable:
            self._promote_to_stable()
        return decision

    async def follow_aliases(self) -> None:
        """Model directories that are aliases (models/registry.py) move: a side whose
        replicas came back on another model starts what that means. A new canary model
        starts a rollout of its own (with its reviewed set); the stable side on the
        canary's model ends the rollout."""
        if self._canary is None:
            return
        stable = (await self._stable.labels.remote())["model_version"]
        canary = (await self._canary.labels.remote())["model_version"]
        now, wall = self._clock(), self._wall()
        if stable != self._versions["stable"]:
            self._versions["stable"] = stable
            logger.info("stable side now serves %s", stable)
            if stable == self._rollout.canary_version:
                self._changed(self._rollout.stable_is(stable, now, wall))
        if canary != self._versions["canary"]:
            self._versions["canary"] = canary
            self._reviewed_items = reviewed_set(self._config.canary_model_dir)
            self._golden = None
            version = canary if canary != stable else None
            start, shadow = self._config.policy.start_percent, self._config.shadow
            self._changed(self._rollout.new_canary(version, start, shadow, now, wall))
            logger.info("canary side now serves %s", canary)

    def _promote_to_stable(self) -> None:
        """A complete rollout makes the canary's model the stable one by moving the
        aliases; Serve replaces the stable replicas, which load it (their health check
        fails once their alias moved) while the canary keeps every ticket."""
        stable, canary = self._stable_model_dir, self._config.canary_model_dir
        if not (stable and canary and Path(stable).is_symlink() and Path(canary).is_symlink()):
            logger.warning(
                "rollout complete; not promoted: model.engine.model_dir and canary_model_dir are not aliases"
            )
            return
        logger.info("promoting %s to stable", registry.promote(stable, canary))

    def restore_stable(self) -> dict[str, Any]:
        """Stable back to the model before the last promotion (the `previous` alias)."""
        if not (self._stable_model_dir and Path(self._stable_model_dir).is_symlink()):
            raise NoCanary("model.engine.model_dir is not an alias (models/registry.py): nothing to restore")
        try:
            registry.restore_previous(self._stable_model_dir)
        except FileNotFoundError as e:
            raise NoCanary(str(e)) from None
        return self.state()

    async def _judge_loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.judge_interval_s)
            try:
                await self.follow_aliases()
                await self.judge_once()
            except Exception:  # a failed round (a side restarting) is judged again next time
                logger.exception("canary judge round failed")

    async def _ask(self, name: str, items: list[GoldenItem]) -> dict[Side, list[str | None]]:
        sides: dict[Side, DeploymentHandle] = {"stable": self._stable, "canary": self._require_canary()}
        return await ask_both(sides, items, f"{name}-{self._rollout.generation}")

    async def _ask_golden(self) -> dict[str, Any]:
        """Both sides answer the golden sample, and the canary's reviewed set if it has one."""
        items = self._golden_items
        answers = await self._ask("golden", items)
        pairs = [(s, c) for s, c in zip(answers["stable"], answers["canary"]) if s is not None and c is not None]
        result = {
            "versions": dict(self._versions),
            "tickets": len(items),
            "compared": len(pairs),
            "agreed": sum(s == c for s, c in pairs),
        }
        for side in COLORS:
            share = accuracy(answers[side], items)
            result[f"{side}_accuracy"] = round(share, 4)
            self._golden_accuracy.set(share, tags={"side": side})
        logger.info("golden set: stable %(stable_accuracy).3f, canary %(canary_accuracy).3f", result)
        if self._reviewed_items:
            reviewed = await self._ask("reviewed", self._reviewed_items)
            result["reviewed_tickets"] = len(self._reviewed_items)
            for side in COLORS:
                result[f"reviewed_{side}_accuracy"] = round(accuracy(reviewed[side], self._reviewed_items), 4)
            logger.info(
                "reviewed set: stable %(reviewed_stable_accuracy).3f, canary %(reviewed_canary_accuracy).3f", result
            )
        return result

    # --- state changes ---

    def _changed(self, change: Change | None) -> None:
        """A change starts a new count of live figures and is saved at once."""
        if change is None:
            return
        if change.action == "rollback":
            logger.warning("canary %s rolled back: %s", change.canary_version, change.reason)
        if change.action != "set":
            self._decisions.inc(tags={"action": change.action})
        self._live = LiveFigures()
        self._percent_gauge.set(change.to_percent)
        self._save()

    def _require_canary(self) -> DeploymentHandle:
        if self._canary is None:
            raise NoCanary("no canary model is deployed (rollout.canary_model_dir is null)")
        return self._canary

    def _save(self) -> None:
        save_json(self._config.state_path, self._rollout.saved())

    def _load(self) -> dict[str, Any] | None:
        return load_json(self._config.state_path)
