"""The canary controller, its callers' view and the model path's sides, with small
stand-in model handles, a golden file of a few tickets and a fake clock."""

import asyncio
import csv
import dataclasses
import json

import pytest

from deployments.api import ModelAnswer, ModelUnavailable
from deployments.callers.canary_view import CanaryView
from deployments.callers.model_path import ModelPath
from deployments.config_loop import RolloutConfig
from deployments.nodes.canary import CanaryController
from deployments.nodes.canary_evidence import golden_sample
from deployments.nodes.in_process import construct
from models.golden import GoldenItem
from policies.retry import RetryConfig
from policies.rollout import Split, SyncReport
from tests.harness import as_handle

GOLDEN = [
    ("my parcel is broken", "damaged_item"),
    ("where is my order", "order_status"),
    ("refund me please", "refund_request"),
    ("cancel it now", "cancel_order"),
]
POLICY = {
    "min_compared": 4,
    "min_canary_answers": 3,
    "min_p99_answers": 3,
    "hold_s": 10,
    "step_percent": 10,
    "start_percent": 5,
}


class Model:
    """A model side: labels() and predict(text) answering from a table (or failing)."""

    def __init__(self, version: str, answers: dict[str, str] | None = None, fail: bool = False):
        self.version, self.answers, self.fail, self.calls = version, answers or dict(GOLDEN), fail, []

    def __getattr__(self, name):
        method = getattr(self, f"_{name}")
        return type("M", (), {"remote": staticmethod(lambda *a, **kw: method(*a, **kw))})

    async def _labels(self):
        return {"model_version": self.version, "labels": []}

    async def _predict(self, prompt, request_id, tenant=None):
        self.calls.append((prompt, request_id))
        if self.fail:
            raise ModelUnavailable("down")
        return ModelAnswer(self.answers.get(prompt, "complaint"), 0.9, self.version)


SHUFFLED = {text: intent for (text, _), (_, intent) in zip(GOLDEN, GOLDEN[1:] + GOLDEN[:1])}


@pytest.fixture
def settings(tmp_path):
    golden = tmp_path / "golden.csv"
    with open(golden, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "intent", "lang", "route", "case"])
        w.writerows([text, intent, "en", "model", "typical"] for text, intent in GOLDEN)
    return {"golden_file": str(golden), "state_path": str(tmp_path / "state.json"), "policy": POLICY}


def controller(settings, canary: Model | None, clock: list[float], **overrides) -> CanaryController:
    config = RolloutConfig.model_validate({**settings, **overrides})

    async def make():
        return await construct(
            CanaryController, config, Model("v1"), canary, lambda: clock[0], lambda: 1e9 + clock[0], judge_loop=False
        )

    return asyncio.run(make())


def report(c: CanaryController, canary_ms=(), stable_ms=(), errors=0, compared=0, agreed=0, generation=None):
    g = c.sync(SyncReport()).generation if generation is None else generation
    return c.sync(SyncReport(g, list(stable_ms), list(canary_ms), errors, compared, agreed))


def test_a_canary_answering_wrong_labels_is_rolled_back_and_its_cache_epoch_bumped(settings):
    clock = [0.0]
    c = controller(settings, Model("v2", SHUFFLED), clock)
    assert c.state()["status"] == "rolling" and c.state()["percent"] == 5
    decision = asyncio.run(c.judge_once())
    assert decision.action == "rollback" and "golden accuracy 0.000 vs stable 1.000" in decision.reason
    state = c.state()
    assert (state["status"], state["percent"], state["epoch"]) == ("rolled_back", 0, 1)
    assert state["history"][-1]["reason"] == decision.reason
    assert json.loads(open(settings["state_path"]).read())["status"] == "rolled_back"
    assert asyncio.run(c.judge_once()) is None  # nothing left to judge


def test_a_restart_keeps_the_rollback_of_the_same_canary_only(settings):
    clock = [0.0]
    c = controller(settings, Model("v2", SHUFFLED), clock)
    asyncio.run(c.judge_once())
    again = controller(settings, Model("v2", SHUFFLED), clock)
    assert (again.state()["status"], again.state()["percent"]) == ("rolled_back", 0)
    assert again.state()["history"][-1]["action"] == "rollback"
    other = controller(settings, Model("v3"), clock)
    assert (other.state()["status"], other.state()["percent"]) == ("rolling", 5)


def test_a_good_canary_is_promoted_by_steps_after_the_hold_then_completes(settings):
    clock = [0.0]
    c = controller(settings, Model("v2"), clock, policy={**POLICY, "start_percent": 80})
    report(c, canary_ms=[10, 12, 11], stable_ms=[10, 11])
    assert asyncio.run(c.judge_once()).action == "hold"  # samples there, hold time not yet
    clock[0] = 11
    decision = asyncio.run(c.judge_once())
    assert (decision.action, c.state()["percent"]) == ("promote", 90)
    assert c.state()["live"]["canary_answers"] == 0  # a new share starts a new count
    clock[0] = 22
    assert asyncio.run(c.judge_once()).reason == "waiting for samples"
    report(c, canary_ms=[10, 10, 10])
    clock[0] = 33
    asyncio.run(c.judge_once())
    report(c, canary_ms=[10, 10, 10])
    clock[0] = 44
    assert asyncio.run(c.judge_once()).action == "complete"
    assert [h["action"] for h in c.state()["history"]] == ["promote", "promote", "complete"]
    assert c.state()["status"] == "complete" and asyncio.run(c.judge_once()) is None


def test_figures_from_an_older_split_do_not_count(settings):
    clock = [0.0]
    c = controller(settings, Model("v2"), clock)
    old = c.sync(SyncReport()).generation
    c.set_split(percent=20)
    report(c, canary_ms=[10] * 5, errors=5, generation=old)
    assert c.state()["live"]["canary_answers"] == 0
    assert c.state()["totals"]["canary_errors"] == 5  # still counted in the totals


def test_live_errors_roll_back_and_shadow_checks_never_promote(settings):
    clock = [0.0]
    c = controller(settings, Model("v2"), clock, shadow=True)
    report(c, canary_ms=[10, 10, 10], stable_ms=[10], compared=4, agreed=4)
    clock[0] = 11
    decision = asyncio.run(c.judge_once())
    assert decision.action == "hold" and "shadow" in decision.reason and c.state()["percent"] == 5
    report(c, errors=3)
    assert asyncio.run(c.judge_once()).action == "rollback"


def test_operator_actions_and_refusals_without_a_canary(settings):
    clock = [0.0]
    c = controller(settings, Model("v2"), clock)
    assert c.promote()["percent"] == 15
    assert c.set_split(shadow=True)["shadow"] is True
    assert c.rollback("bad smell")["history"][-1]["reason"] == "bad smell"
    assert c.set_split(percent=0)["status"] == "idle"
    none = controller(settings, None, clock)
    assert none.state()["status"] == "none"
    with pytest.raises(Exception, match="no canary"):
        none.promote()
    assert none.flush_caches()["epoch"] == 1


def test_golden_sample_spreads_over_the_file():
    items = [GoldenItem(f"t{i}", f"intent{i // 10}", "en", "model", "typical") for i in range(100)]
    sample = golden_sample(items, 10)
    assert len(sample) == 10 and len({i.intent for i in sample}) == 10
    assert golden_sample(items, 0) == items


class Controller:
    def __init__(self, split):
        self.split, self.reports = split, []
        self.sync = type("M", (), {"remote": staticmethod(self._sync)})

    async def _sync(self, report):
        self.reports.append(report)
        if self.split is None:
            raise ModelUnavailable("gone")
        return self.split


SPLIT = Split(percent=50.0, shadow=False, status="rolling", epoch=3, generation=7, canary_version="v2")


def view(split) -> tuple[CanaryView, Controller]:
    controller = Controller(split)
    v = CanaryView(as_handle(controller), 0.5, 1.0)
    asyncio.run(v.sync())
    return v, controller


def test_the_view_splits_by_ticket_colours_and_shadows():
    v, _ = view(SPLIT)
    sides = [v.route(f"ticket-{i}", None) for i in range(400)]
    assert 150 < sum(side == "canary" for side, _ in sides) < 250
    assert [v.route(f"ticket-{i}", None) for i in range(400)] == sides
    assert v.route("ticket-1", "canary") == ("canary", False) and v.route("ticket-1", "stable") == ("stable", False)
    shadowed, _ = view(dataclasses.replace(SPLIT, shadow=True, percent=100))
    assert shadowed.route("ticket-1", None) == ("stable", True)


def test_the_view_sends_its_figures_and_without_the_controller_sends_all_to_stable():
    v, controller = view(SPLIT)
    v.record("canary", 12.0, failed=False)
    v.record("canary", 0.0, failed=True)
    v.record("stable", 9.0, failed=False)
    v.record_shadow(agreed=False)
    controller.split = None
    asyncio.run(v.sync())
    sent = controller.reports[-1]
    assert (sent.generation, sent.canary_ms, sent.stable_ms, sent.canary_errors) == (7, [12.0], [9.0], 1)
    assert (sent.compared, sent.agreed) == (1, 0)
    assert all(v.route(f"ticket-{i}", None) == ("stable", False) for i in range(100))
    assert v.epoch == 3  # the last known epoch: caches are not flushed by a lost controller


def path_with(stable: Model, canary: Model, split: Split) -> tuple[ModelPath, CanaryView]:
    v, _ = view(split)
    tokenizer = type("T", (), {"tokenize": type("M", (), {"remote": staticmethod(lambda text: _echo(text))})})
    return ModelPath(as_handle(tokenizer), as_handle(stable), None, RetryConfig(), canary=as_handle(canary), split=v), v


async def _echo(text):
    return text


def test_the_model_path_asks_the_chosen_side_and_hands_a_failed_canary_ticket_to_stable():
    stable, canary = Model("v1"), Model("v2")
    path, v = path_with(stable, canary, SPLIT)
    answer = asyncio.run(path.classify("where is my order", "r1", side="canary"))
    assert (answer.model_version, answer.side) == ("v2", "canary") and not stable.calls
    canary.fail = True
    answer = asyncio.run(path.classify("where is my order", "r2", side="canary"))
    assert (answer.model_version, answer.side) == ("v1", "stable")
    assert v._report.canary_errors == 1 and len(v._report.stable_ms) == 1


def test_shadow_copies_are_compared_but_stable_answers():
    stable, canary = Model("v1"), Model("v2", SHUFFLED)
    path, v = path_with(stable, canary, dataclasses.replace(SPLIT, shadow=True))

    async def ask():
        answer = await path.classify("where is my order", "r1", shadow=True)
        await asyncio.gather(*path._shadows)
        return answer

    assert asyncio.run(ask()).model_version == "v1"
    assert canary.calls == [("where is my order", "r1-shadow")]
    assert (v._report.compared, v._report.agreed) == (1, 0)
