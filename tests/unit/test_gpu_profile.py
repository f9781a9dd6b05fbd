"""The GPU-shaped fake replica's cost model: steps that batch what waits, within the
concurrency ceiling and the token budget, at a GPU's step time; and the fake engine
answering through it."""

import asyncio
from dataclasses import replace

import pytest

from deployments.engines import EngineConfig
from deployments.engines import fake as fake_engine
from deployments.engines.gpu_profile import GPU_E5_SMALL, GpuProfile, StepBatcher

SMALL = GpuProfile(step_overhead_ms=4.0, per_token_us=1000.0, max_num_seqs=4, max_batched_tokens=100, start_s=0.0)


def test_a_step_takes_what_waits_within_the_ceiling_and_the_token_budget():
    assert SMALL.step_ms(30) == pytest.approx(34.0)
    assert SMALL.take([10] * 9) == 4  # the concurrency ceiling
    assert SMALL.take([40, 40, 40]) == 2  # 120 tokens would pass the budget
    assert SMALL.take([500, 10]) == 1  # an oversized prompt still runs, alone
    assert SMALL.take([]) == 0


def test_the_e5_profile_serves_thousands_of_tickets_a_second_per_replica():
    # ~40 tokens a ticket: full steps of 409 tickets (16,384 tokens) in 24.5 ms.
    assert 10_000 < GPU_E5_SMALL.requests_per_s(40) < 30_000
    assert GPU_E5_SMALL.requests_per_s(40) > 50 * 1000 / GPU_E5_SMALL.step_ms(40)


def test_a_scaled_profile_keeps_the_shape_at_a_rate_two_cores_can_saturate():
    bench = GPU_E5_SMALL.scaled(24, 256, start_s=8.0)
    assert (bench.max_num_seqs, bench.max_batched_tokens, bench.start_s) == (4, 64, 8.0)
    assert bench.step_ms(50) == pytest.approx(24 * GPU_E5_SMALL.step_ms(50))
    # 17-token tickets (the load mix's mean): 3 a step, ~30/s instead of ~30,000, in ~100 ms.
    assert bench.take([17] * 5) == 3
    assert 25 < bench.requests_per_s(17) < 35 and bench.step_ms(51) < 100
    assert GPU_E5_SMALL.scaled() == GPU_E5_SMALL


def test_waiting_requests_share_steps_and_late_ones_take_the_next():
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(0)

    async def scenario() -> list[int]:
        batcher = StepBatcher(SMALL, sleep)
        first = [asyncio.ensure_future(batcher.run(10)) for _ in range(6)]
        await asyncio.sleep(0)  # the loop's first step is under way: 4 of the 6
        late = [asyncio.ensure_future(batcher.run(10)) for _ in range(3)]
        await asyncio.gather(*first, *late)
        return list(batcher.steps)

    steps = asyncio.run(scenario())
    assert steps == [4, 4, 1] and sum(steps) == 9
    assert slept[0] == pytest.approx((4.0 + 40 * 1.0) / 1000)


def test_the_fake_engine_answers_at_the_profiles_cost(monkeypatch, default_model_dir):
    monkeypatch.setitem(fake_engine.PROFILES, "gpu-e5-small", replace(SMALL, start_s=0.0))
    config = EngineConfig(mode="fake", model_dir=default_model_dir, fake_gpu_profile="gpu-e5-small")
    engine = fake_engine.FakeTicketEngine(config, default_model_dir)
    assert engine.batch_capacity() == 4

    async def answer_many() -> list[str]:
        answers = await asyncio.gather(*(engine.predict("my parcel never came", f"r{i}") for i in range(6)))
        return [a.label for a in answers]

    labels = asyncio.run(answer_many())
    assert len(set(labels)) == 1 and labels[0] in engine.metadata.labels
    assert list(engine._batcher.steps) == [4, 2]
