"""The rollout state machine (policies/rollout.py) on its own: statuses, generations,
the cache epoch, shadow holds and restoring a saved rollout, with plain clock readings."""

from policies.canary import Decision
from policies.rollout import Rollout, Split


def test_without_a_canary_nothing_is_judged_and_the_split_is_empty():
    r = Rollout(None, start_percent=5, shadow=False, now=0)
    assert not r.judged and r.split() == Split(generation=0)
    assert not r.restore({"canary_version": None, "percent": 50, "shadow": False, "status": "rolling"})


def test_every_change_starts_a_generation_and_is_recorded():
    r = Rollout("v2", start_percent=5, shadow=False, now=0)
    assert (r.status, r.percent, r.judged) == ("rolling", 5, True)
    change = r.promote(10, "operator", now=3, at_unix_s=100.0004)
    assert (change.from_percent, change.to_percent, change.at_unix_s) == (5, 15, 100.0)
    assert (r.generation, r.since) == (1, 3)
    r.set_split(0, None, now=4, at_unix_s=101)
    assert (r.status, r.judged, r.generation) == ("idle", False, 2)
    assert [c.action for c in r.history] == ["promote", "set"]


def test_a_rollback_bumps_the_cache_epoch_and_stops_judging():
    r = Rollout("v2", start_percent=30, shadow=True, now=0)
    decision, change = r.apply(Decision("rollback", 0.0, "P99 too high"), now=5, at_unix_s=0)
    assert decision.action == "rollback" and change.reason == "P99 too high"
    assert (r.status, r.percent, r.shadow, r.epoch, r.judged) == ("rolled_back", 0, False, 1, False)
    assert r.flush_caches() == 2


def test_a_promotion_in_shadow_mode_is_held_and_a_full_share_completes():
    r = Rollout("v2", start_percent=50, shadow=True, now=0)
    decision, change = r.apply(Decision("promote", 60.0, "every check held"), now=5, at_unix_s=0)
    assert decision.action == "hold" and "shadow" in decision.reason and change is None and r.percent == 50
    r.set_split(None, False, now=6, at_unix_s=0)
    _, change = r.apply(Decision("promote", 60.0, "every check held"), now=7, at_unix_s=0)
    assert change.to_percent == 60 and r.generation == 2
    _, change = r.apply(Decision("complete", 100.0, "done"), now=8, at_unix_s=0)
    assert (r.status, r.percent, r.judged) == ("complete", 100, False)
    assert r.apply(Decision("hold", 100.0, "no rollout"), now=9, at_unix_s=0)[1] is None


def test_a_shadow_that_held_every_check_goes_live_by_policy():
    r = Rollout("v2", start_percent=100, shadow=True, now=0)
    decision, change = r.apply(Decision("promote", 100.0, "every check held"), now=5, at_unix_s=0, live_percent=5)
    assert (decision.action, change.to_percent, change.shadow) == ("promote", 5, False)
    assert (r.status, r.percent, r.shadow, r.judged) == ("rolling", 5, False, True)
    assert "live at 5 %" in change.reason


def test_a_saved_rollout_of_the_same_version_wins_over_the_start():
    r = Rollout("v2", start_percent=5, shadow=False, now=0)
    r.rollback("bad", now=1, at_unix_s=10)
    saved = r.saved()
    again = Rollout("v2", start_percent=5, shadow=False, now=2)
    assert again.restore(saved) and (again.status, again.percent) == ("rolled_back", 0)
    assert again.history[-1].reason == "bad"
    other = Rollout("v3", start_percent=5, shadow=False, now=2)
    assert not other.restore(saved) and (other.status, other.percent) == ("rolling", 5)
