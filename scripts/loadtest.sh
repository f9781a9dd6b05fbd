#!/usr/bin/env bash
# Set up, then run the load suite against the graph and its peers and write the report
# (python -m loadtest.run --help for the options; `--targets graph` for the graph alone).
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # bytecode written once, read at every start: scripts/setup.sh
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export PATH="$ROOT/.venv/bin:$PATH"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec python -m loadtest.run "$@"
