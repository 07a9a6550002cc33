#!/usr/bin/env bash
# Run the default test suite (about 10 minutes on 2 cores). Sets up .venv first if needed.
# Long science checks: `bash scripts/test.sh -m slow` (see README).
# The test files run in PYTEST_WORKERS worker processes (default 2, one torch thread each; a
# file's tests stay in one worker); `-n 0` after the command runs them in this process alone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/pytest ] || ! .venv/bin/python -c "import xdist" 2>/dev/null; then
  bash scripts/setup.sh
fi
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile "$@"
