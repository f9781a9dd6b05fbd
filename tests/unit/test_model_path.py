"""The retry matrix as the edge router applies it: every row, the budget, the breaker's
fallback and the tokenizer fallback, with small stand-in handles and a fake clock."""

import asyncio

from ray.serve._private.common import DeploymentID
from ray.serve.config import AutoscalingContext
from ray.serve.exceptions import BackPressureError

from deployments.api import ModelAnswer, ModelOutOfMemory, ModelThrottled, ModelUnavailable
from deployments.callers.model_path import GiveUp, ModelPath
from deployments.control.autoscaling import QueueLatencyPolicy
from policies.retry import RetryConfig
from tests.harness import as_handle

ANSWER = ModelAnswer("refund", 0.9, "v1")
NEVER = object()  # a call Serve keeps queued: the deployment has no replica


class Method:
    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.calls = []

    def remote(self, *args, **kwargs):
        self.calls.append(args)
        self.kwargs = kwargs
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]

        async def answer():
            if outcome is NEVER:
                await asyncio.Event().wait()
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        return answer()


class Handle:
    """A deployment handle whose methods answer their outcomes in turn."""

    def __init__(self, **methods):
        self.methods = {name: Method(outcomes) for name, outcomes in methods.items()}

    def __getattr__(self, name: str) -> Method:
        try:
            return self.methods[name]
        except KeyError:
            raise AttributeError(name) from None


class FakeBreakerView:
    def __init__(self, action):
        self.action = action
        self.records = []

    async def acquire(self):
        return self.action

    def record(self, failed, duration_ms):
        self.records.append(failed)


def run(model_outcomes, tokenizer_outcomes=([1, 2, 3],), breaker=None, **retry):
    waits = []

    async def sleep(s):
        waits.append(s)

    model = Handle(predict=model_outcomes)
    path = ModelPath(
        as_handle(Handle(tokenize=tokenizer_outcomes)),
        as_handle(model),
        breaker,
        RetryConfig(**retry),
        clock=lambda: 0.0,
        sleep=sleep,
    )
    result = asyncio.run(path.classify("my card was charged twice", "r1"))
    return result, len(model.predict.calls), waits, model


def test_success_first_try_sends_token_ids():
    result, calls, waits, model = run([ANSWER])
    assert (result, calls, waits) == (ANSWER, 1, [])
    assert model.predict.calls[0] == ([1, 2, 3], "r1")


def test_throttled_row_three_tries_200ms_then_cache():
    result, calls, waits, _ = run([ModelThrottled("full")])
    assert (result, calls, waits) == (GiveUp("cache", "throttled"), 3, [0.2, 0.2])
    result, calls, _, _ = run([BackPressureError(num_queued_requests=1, max_queued_requests=1)])
    assert (result.then, calls) == ("cache", 3)  # Serve's own full queue is the same row


def test_unavailable_row_two_tries_500ms_then_degraded():
    result, calls, waits, _ = run([ModelUnavailable("dead")])
    assert (result, calls, waits) == (GiveUp("degraded", "unavailable"), 2, [0.5])
    result, calls, _, _ = run([RuntimeError("replica lost")])
    assert (result.then, calls) == ("degraded", 2)


def test_out_of_memory_row_no_retry():
    result, calls, waits, _ = run([ModelOutOfMemory("oom")])
    assert (result, calls, waits) == (GiveUp("degraded", "out_of_memory"), 1, [])


def test_timeout_row_cancels_the_call_and_answers_degraded_without_a_retry():
    breaker = FakeBreakerView("pass")
    result, calls, waits, _ = run([NEVER], breaker=breaker, per_try_timeout_ms=10)
    assert (result, calls, waits) == (GiveUp("degraded", "timeout"), 1, [])
    assert breaker.records == [True]  # a replica that cannot answer counts against the path


def test_retry_then_success():
    result, calls, waits, _ = run([ModelUnavailable("restarting"), ANSWER])
    assert (result, calls, waits) == (ANSWER, 2, [0.5])


def test_budget_exhausted_means_no_retry():
    result, calls, _, _ = run([ModelUnavailable("dead")], budget_min_retries=0)
    assert (result.then, calls) == ("degraded", 1)


def test_breaker_fallback_and_reject_skip_the_model():
    view = FakeBreakerView("fallback")
    result, calls, _, _ = run([ANSWER], breaker=view)
    assert (result, calls) == (GiveUp("degraded", "breaker_open"), 0)
    result, calls, _, _ = run([ANSWER], breaker=FakeBreakerView("reject_new"))
    assert (result.then, calls) == ("reject", 0)


def test_breaker_sees_failures_but_not_throttling():
    view = FakeBreakerView("pass")
    run([ModelUnavailable("dead"), ANSWER], breaker=view)
    assert view.records == [True, False]
    view = FakeBreakerView("pass")
    run([ModelThrottled("full"), ANSWER], breaker=view)
    assert view.records == [False]


def test_tokenizer_down_sends_raw_text():
    _, _, _, model = run([ANSWER], tokenizer_outcomes=[ModelUnavailable("gone")])
    assert model.predict.calls[0][0] == "my card was charged twice"


def context(replicas, ongoing, p95s, throttled=None):
    metrics = {"p95_ms": p95s} if p95s is not None else {}
    if throttled is not None:
        metrics["throttled_per_s"] = throttled
    return AutoscalingContext(
        deployment_id=DeploymentID(name="ModelReplica", app_name="tickets"),
        deployment_name="ModelReplica",
        app_name="tickets",
        current_num_replicas=replicas,
        target_num_replicas=replicas,
        running_replicas=[],
        total_num_requests=ongoing,
        total_queued_requests=0,
        aggregated_metrics=metrics,
        raw_metrics={},
        capacity_adjusted_min_replicas=1,
        capacity_adjusted_max_replicas=4,
        policy_state={},
        last_scale_up_time=None,
        last_scale_down_time=None,
        current_time=0.0,
        config=None,
    )


def test_autoscaling_policy_reads_serve_context():
    policy = QueueLatencyPolicy(target_ongoing_per_replica=10, p95_target_ms=1000)
    assert policy(context(1, 35, {"a": 200.0}))[0] == 4
    assert policy(context(2, 12, {"a": 300.0, "b": 1800.0}))[0] == 3  # the worst replica counts
    replicas, state = policy(context(3, 2, None))
    assert (replicas, state["last_reason"]) == (2, "both signals low")
    # Refused calls, summed over the replicas: 2 x 5/s for 0.9 s adds 9 to a queue of 8 (target 10).
    replicas, state = policy(context(1, 8, {"a": 900.0, "b": 900.0}, {"a": 5.0, "b": 5.0}))
    assert (replicas, state["cause"]) == (2, "throttled")
