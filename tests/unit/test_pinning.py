"""--engine-cpus: the CPU list it accepts, and the pinning of engine-core processes."""

import os
import subprocess
import sys
import time

import pytest

from loadtest.pinning import EnginePinner, parse_cpus

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="pinning needs two CPUs this process may use")

# A stand-in engine: names itself as vLLM's engine core does, with setproctitle and a title
# over the kernel's 15 characters (its own, so that no real engine of this test session is
# moved), and starts a second thread.
TITLE = "tspin::EngineCore"
ENGINE = f"""
import setproctitle, threading, time
setproctitle.setproctitle("{TITLE}")
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("ready", flush=True)
time.sleep(60)
"""


@needs_two
def test_parse_cpus_takes_lists_and_ranges_of_usable_cpus():
    assert parse_cpus(str(CPUS[-1])) == {CPUS[-1]}
    assert parse_cpus(f"{CPUS[0]}-{CPUS[0]}") == {CPUS[0]}


@pytest.mark.parametrize(
    "text, error",
    [("one", "expected CPU ids"), ("1-x", "expected CPU ids"), ("4096", "not among")],
)
def test_parse_cpus_names_the_bad_value(text, error):
    with pytest.raises(ValueError, match=error) as e:
        parse_cpus(text)
    assert repr(text) in str(e.value)


def test_parse_cpus_leaves_a_cpu_for_the_rest():
    with pytest.raises(ValueError, match="leaves none"):
        parse_cpus(",".join(map(str, CPUS)))


@needs_two
def test_sweep_pins_every_thread_of_an_engine_process_and_no_other():
    engine_cpus = {CPUS[-1]}
    engine = subprocess.Popen([sys.executable, "-c", ENGINE], stdout=subprocess.PIPE, text=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert engine.stdout.readline().strip() == "ready"
        pinner = EnginePinner(engine_cpus, name_prefix=TITLE[:15])
        assert pinner.rest == set(CPUS) - engine_cpus
        deadline = time.monotonic() + 10
        while engine.pid not in pinner.pinned and time.monotonic() < deadline:
            pinner.sweep()
        threads = os.listdir(f"/proc/{engine.pid}/task")
        assert len(threads) == 2
        assert all(os.sched_getaffinity(int(t)) == engine_cpus for t in threads)
        assert pinner.pinned == {engine.pid}
        assert os.sched_getaffinity(bystander.pid) == set(CPUS)
    finally:
        engine.kill()
        bystander.kill()
        engine.wait()
        bystander.wait()
