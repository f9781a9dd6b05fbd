"""What produced a result: every result file the benchmarks write carries it under `run`,
so a figure quoted from it names its command, date, commit and machine."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class RunStamp:
    command: str  # as a reader would type it: python -m bench.x --flag value
    utc: str  # when the result was written, ISO 8601
    commit: str  # the checkout's short hash, "+dirty" where tracked files differ from it
    machine: str  # cores, memory and processor

    @classmethod
    def now(cls) -> RunStamp:
        return cls(command(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit(), machine())


def command() -> str:
    """The running command: `python -m <module>` where a module runs, else the script."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(ROOT) and script.suffix == ".py":
        module = ".".join(script.relative_to(ROOT).with_suffix("").parts).removesuffix(".__main__")
        return shlex.join(["python", "-m", module, *sys.argv[1:]])
    return shlex.join(sys.argv)


def commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short=7", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine() -> str:
    memory_gib = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} cores, {memory_gib:.0f} GiB, {processor()}"


def processor() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def stamped(payload: dict) -> dict:
    """The payload with the stamp of this run under `run`."""
    return {**payload, "run": asdict(RunStamp.now())}
