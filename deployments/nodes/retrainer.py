"""Retrains from reviews on the Ray cluster: `POST /admin/retrain` builds a candidate
model (models/retrain.py) from the serving model's own rows plus every resolved review item,
warm-started from the serving model, in a Ray task of its own: its own CPU reservation
(`retrain.num_cpus`), a few threads at a lower priority (`torch_threads`, `niceness`), so
the graph keeps its cores. The task shows in the Ray dashboard (Jobs → tasks, its
worker's logs) and is cancelled by `POST /admin/retrain/stop`. Its log is written beside
the candidate for the admin API and the console.

`Retrainer` is the one deployment that starts and watches retrains. Their record is a
JSON file (`retrain.state_path`): a restart of the graph keeps every finished run, and a
run the restart interrupted is recorded as failed.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, TextIO

import ray
from ray.exceptions import TaskCancelledError

from deployments.api import Refusal
from deployments.config_loop import RetrainConfig
from deployments.nodes.review_store import ReviewStore, utc_now
from deployments.nodes.state_file import load_json, save_json
from models import registry

DEFAULT_OPTIONS = {
    "name": "Retrainer",
    "num_replicas": 1,
    "max_ongoing_requests": 64,
    "ray_actor_options": {"num_cpus": 0},
}
LOG_TAIL_LINES = 20
HISTORY = 20

RunStatus = Literal["running", "succeeded", "failed", "stopped"]


@dataclass(frozen=True)
class RetrainRun:
    run_id: str
    status: RunStatus
    started_at: str
    source_dir: str
    candidate_dir: str
    ended_at: str | None = None
    candidate_version: str | None = None
    seconds: float | None = None
    message: str = ""


class _Tee:
    """Output to the log file the admin API reads and to the worker's own log, which the
    Ray dashboard shows."""

    def __init__(self, *streams: TextIO):
        self._streams = streams

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


def run_retrain(store: str, source: str, out: str, log: str, config: RetrainConfig) -> dict[str, Any]:
    """The Ray task's body (a process of its own): lower priority, few threads."""
    import torch

    from models.retrain import RetrainSettings, retrain

    os.nice(config.niceness)
    torch.set_num_threads(config.torch_threads)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", buffering=1, encoding="utf-8") as f:
        sys.stdout, sys.stderr = _Tee(f, sys.stdout), _Tee(f, sys.stderr)
        settings = RetrainSettings(config.epochs, config.reviewed_share, config.replay_rows, config.review_weight)
        reviews = ReviewStore(store)
        rows = [(r["text"], r["label"], r["lang"]) for r in reviews.training_rows()]
        accepted = {p.name: p.description for p in reviews.proposals("accepted")}
        reviews.close()
        meta = retrain(rows, Path(source), Path(out), settings, new_labels=accepted)
    return {"version": meta.version, "seconds": meta.extra["retrain"]["seconds"]}


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines of a log, progress bars' carriage returns read as line ends."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")
    return [line for line in text.splitlines() if line.strip()][-lines:]


class Retrainer:
    def __init__(
        self,
        config: RetrainConfig,
        store_path: str,
        model_dir: str,
        canary_link: str | None = None,
        clock: Callable[[], datetime.datetime] = utc_now,
    ):
        """`canary_link`: the canary's model alias, pointed at each finished candidate."""
        self._config = config
        self._canary_link = canary_link
        self._store_path = store_path
        self._model_dir = model_dir
        self._clock = clock
        self._state_path = Path(config.state_path)
        self._runs = self._load()
        self._task: ray.ObjectRef | None = None
        self._watch: asyncio.Task | None = None

    def _load(self) -> list[RetrainRun]:
        runs = [RetrainRun(**r) for r in load_json(self._state_path) or []]
        # A run this replica did not start ended with the replica that did.
        return [
            replace(r, status="failed", message="interrupted: the graph restarted during the retrain")
            if r.status == "running"
            else r
            for r in runs
        ]

    def _save(self) -> None:
        save_json(self._state_path, [asdict(r) for r in self._runs[-HISTORY:]])

    def _current(self) -> RetrainRun | None:
        return self._runs[-1] if self._runs else None

    def _end(self, status: RunStatus, **fields: Any) -> None:
        run = self._current()
        if run is None or run.status != "running":
            return
        self._runs[-1] = replace(run, status=status, ended_at=self._clock().isoformat(timespec="seconds"), **fields)
        self._task = None
        self._save()

    async def start(self) -> RetrainRun | Refusal:
        run = self._current()
        if run is not None and run.status == "running":
            return Refusal(409, "retrain_running", f"retrain {run.run_id} is running; stop it or wait")
        now = self._clock()
        run_id = now.strftime("%Y%m%d-%H%M%S")
        out = Path(self._config.candidates_dir) / f"candidate-{run_id}"
        run = RetrainRun(run_id, "running", now.isoformat(timespec="seconds"), self._model_dir, str(out))
        # A fresh process each time (max_calls=1): the niced, redirected worker is not reused.
        task = ray.remote(max_calls=1)(run_retrain).options(
            num_cpus=self._config.num_cpus, max_retries=0, name=f"retrain-{run_id}"
        )
        self._task = task.remote(self._store_path, self._model_dir, str(out), str(self._log(run)), self._config)
        self._runs.append(run)
        self._save()
        self._watch = asyncio.get_running_loop().create_task(self._await(self._task))
        return run

    def _log(self, run: RetrainRun) -> Path:
        return Path(run.candidate_dir).with_suffix(".log")

    async def _await(self, task: ray.ObjectRef) -> None:
        try:
            result = await task
        except TaskCancelledError:
            self._end("stopped", message="stopped by an admin")
        except Exception as e:  # the task's own failure, or its worker's death
            run = self._current()
            tail = log_tail(self._log(run)) if run else []
            self._end("failed", message=(tail[-1] if tail else type(e).__name__)[:500])
        else:
            self._end("succeeded", candidate_version=result["version"], seconds=result["seconds"])
            if self._canary_link is not None:
                registry.point(self._canary_link, self._runs[-1].candidate_dir)

    async def stop(self) -> RetrainRun | Refusal:
        run = self._current()
        if run is None or run.status != "running" or self._task is None:
            return Refusal(409, "no_retrain", "no retrain is running")
        ray.cancel(self._task, force=True)
        if self._watch is not None:
            await asyncio.wait([self._watch], timeout=30)
        return self._current() or run

    async def state(self) -> dict[str, Any]:
        run = self._current()
        return {
            "status": run.status if run else "idle",
            "current": asdict(run) if run else None,
            "log_tail": log_tail(self._log(run)) if run else [],
            "runs": [asdict(r) for r in reversed(self._runs)],
        }

    async def ping(self) -> str:
        return "ok"
