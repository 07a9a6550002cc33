#!/usr/bin/env bash
# Run the default test suite (about 15 minutes on 2 cores). Sets up .venv first if needed.
# Long science checks: `bash scripts/test.sh -m slow` (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/pytest ] || bash scripts/setup.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled
exec .venv/bin/python -m pytest "$@"
