"""The open-loop generator against a local aiohttp server: how many arrivals it sends,
and that a `stop` set from another thread ends the run early."""

import asyncio
import threading

from aiohttp import web

from loadkit.generators import open_loop

BODIES = [{"text": "where is my order", "user_id": "u"}]


async def _run(steps: list[tuple[float, float]], stop: threading.Event | None = None) -> tuple:
    async def classify(_: web.Request) -> web.Response:
        return web.json_response({"label": "order_status"})

    app = web.Application()
    app.router.add_post("/v1/classify", classify)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await open_loop(f"http://127.0.0.1:{port}", BODIES, steps, timeout_s=5, max_in_flight=64, stop=stop)
    finally:
        await runner.cleanup()


def test_every_step_sends_its_rate_times_its_seconds():
    out, steps = asyncio.run(_run([(50, 0.4), (100, 0.2)]))
    assert out.counts["ok"] == out.total == 40
    assert [s["requests"] for s in steps] == [20, 20]


def test_a_stop_set_from_another_thread_ends_the_arrivals_early():
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    out, steps = asyncio.run(_run([(50, 60), (50, 60)], stop))
    timer.join()
    # 0.5 s at 50/s is ~25 arrivals, against 6,000 for the whole schedule.
    assert 10 <= out.total <= 60 and out.counts["ok"] == out.total
    assert len(steps) == 1 and steps[0]["seconds"] < 5


def test_each_step_lasts_its_seconds_so_second_long_steps_keep_their_timeline():
    # 2 arrivals a second for 3 one-second steps: sent at 0, 0.5, 1, 1.5, 2, 2.5 s, not
    # with each step starting at its predecessor's last arrival.
    out, _ = asyncio.run(_run([(2, 1.0)] * 3))
    sent_at = sorted(at for at, _ in out.timeline)
    assert len(sent_at) == 6
    assert abs(sent_at[2] - 1.0) < 0.1 and abs(sent_at[4] - 2.0) < 0.1
