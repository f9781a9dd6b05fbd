#!/usr/bin/env bash
# Set up, then run the whole test suite (unit, then integration with real Ray + vLLM).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python -m pytest -v -rs "$@"
