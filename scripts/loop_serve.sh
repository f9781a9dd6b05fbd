#!/usr/bin/env bash
# The graph with the review loop's settings (bench/loop.py LOOP_OVERRIDES): model aliases
# (stable and candidate -> the default model where unset), a retrain that publishes its
# candidate, a shadow rollout that goes live and promotes by itself. Then
# `python -m bench.loop ...` against it (docs/loop.md). Needs TICKETSERVE_ADMIN_TOKEN.
# `--banking77`: the aliases point at a seed model of Banking77's labels, built here.
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # bytecode written once, read at every start: scripts/setup.sh
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
.venv/bin/python -m models.registry init
.venv/bin/python -m bench.loop --write-config var/loop_config.yaml "$@"
exec bash scripts/serve.sh var/loop_config.yaml
