"""Micro-batching of model calls: when tickets go together (the policy, plain numbers) and
the caller's batcher (a small stand-in handle, the real asyncio loop): an idle caller
never waits, piled-up tickets share a call, each caller gets its own answer or failure,
tenants never share a call, and a ticket waits at most `max_wait_ms`."""

from __future__ import annotations

import asyncio

import pytest

from deployments.api import ModelAnswer, ModelFailure, ModelThrottled
from deployments.callers.call_batcher import CallBatcher
from policies.micro_batch import MicroBatchConfig, send_now
from tests.harness import as_handle

CONFIG = MicroBatchConfig(enabled=True, max_calls_in_flight=1, max_batch_tickets=4, max_wait_ms=1000)


def test_an_idle_caller_sends_at_once():
    assert send_now(CONFIG, queued=1, oldest_wait_ms=0, calls_in_flight=0)


def test_tickets_wait_while_every_call_is_out():
    assert not send_now(CONFIG, queued=3, oldest_wait_ms=999, calls_in_flight=1)
    assert not send_now(CONFIG, queued=0, oldest_wait_ms=0, calls_in_flight=0)


def test_a_full_batch_or_the_oldest_tickets_deadline_sends():
    assert send_now(CONFIG, queued=4, oldest_wait_ms=0, calls_in_flight=1)
    assert send_now(CONFIG, queued=1, oldest_wait_ms=1000, calls_in_flight=1)


class Replica:
    """Stands in for the model deployment's handle: records each call; answers when the
    test releases it. A prompt starting with "bad" fails alone."""

    def __init__(self):
        self.calls: list[tuple[list, str | None]] = []
        self.release = asyncio.Event()

    @property
    def predict_many(self):
        return self

    def remote(self, prompts, request_ids, tenant=None):
        self.calls.append((list(prompts), tenant))

        async def answer():
            await self.release.wait()
            return [
                ModelFailure("throttled", "full") if p.startswith("bad") else ModelAnswer(p.upper(), 0.9, "v1")
                for p in prompts
            ]

        return answer()


async def gather_with(replica: Replica, batcher: CallBatcher, tickets: list[tuple[str, str | None]]):
    first = asyncio.ensure_future(batcher.predict(tickets[0][0], "r0", tickets[0][1]))
    await asyncio.sleep(0)  # the first call is out
    rest = [asyncio.ensure_future(batcher.predict(t, f"r{i}", tenant)) for i, (t, tenant) in enumerate(tickets[1:])]
    await asyncio.sleep(0)
    replica.release.set()
    return await asyncio.gather(first, *rest, return_exceptions=True)


def test_piled_up_tickets_share_a_call_and_each_caller_gets_its_own_answer():
    async def scenario():
        replica = Replica()
        batcher = CallBatcher(as_handle(replica), CONFIG, call_timeout_s=5)
        answers = await gather_with(replica, batcher, [(t, None) for t in ["a", "b", "c", "d", "e", "f"]])
        return replica.calls, answers

    calls, answers = asyncio.run(scenario())
    assert [prompts for prompts, _ in calls] == [["a"], ["b", "c", "d", "e"], ["f"]]  # at most 4 to a call
    assert [a.label for a in answers] == ["A", "B", "C", "D", "E", "F"]


def test_a_failed_ticket_fails_alone():
    async def scenario():
        replica = Replica()
        batcher = CallBatcher(as_handle(replica), CONFIG, call_timeout_s=5)
        return replica.calls, await gather_with(
            replica, batcher, [("a", None), ("b", None), ("bad", None), ("c", None)]
        )

    calls, answers = asyncio.run(scenario())
    assert calls[1][0] == ["b", "bad", "c"]
    assert [a.label for a in answers if isinstance(a, ModelAnswer)] == ["A", "B", "C"]
    assert isinstance(answers[2], ModelThrottled)


def test_tenants_never_share_a_call():
    async def scenario():
        replica = Replica()
        batcher = CallBatcher(as_handle(replica), CONFIG, call_timeout_s=5)
        await gather_with(replica, batcher, [("a", "t1"), ("b", "t1"), ("c", "t2"), ("d", "t1")])
        return replica.calls

    calls = asyncio.run(scenario())
    assert sorted((tuple(p), t) for p, t in calls) == [(("a",), "t1"), (("b", "d"), "t1"), (("c",), "t2")]


def test_a_ticket_waits_at_most_max_wait_ms_for_a_call_to_come_back():
    async def scenario():
        replica = Replica()
        batcher = CallBatcher(as_handle(replica), CONFIG.model_copy(update={"max_wait_ms": 20}), call_timeout_s=5)
        stuck = asyncio.ensure_future(batcher.predict("a", "r0"))
        await asyncio.sleep(0)
        waiting = asyncio.ensure_future(batcher.predict("b", "r1"))
        await asyncio.sleep(0.1)  # the first call never comes back in that time
        sent = [p for p, _ in replica.calls]
        replica.release.set()
        await asyncio.gather(stuck, waiting)
        return sent

    assert asyncio.run(scenario()) == [["a"], ["b"]]


def test_a_call_past_its_timeout_fails_its_tickets_and_frees_its_place():
    async def scenario():
        replica = Replica()
        batcher = CallBatcher(as_handle(replica), CONFIG, call_timeout_s=0.05)
        with pytest.raises(TimeoutError):
            await batcher.predict("a", "r0")
        replica.release.set()
        return await batcher.predict("b", "r1")

    assert asyncio.run(scenario()).label == "B"
