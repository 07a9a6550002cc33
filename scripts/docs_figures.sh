#!/usr/bin/env bash
# Regenerate the README's figures (docs/figures/*.png) from runs/demo, training the demo first
# (scripts/demo.sh) when it is not there. Needs chromium for PNG export.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled
[ -f runs/demo/metrics.csv ] || bash scripts/demo.sh
[ -f runs/demo/fit.json ] || .venv/bin/induction-cliff fit runs/demo
exec .venv/bin/python scripts/docs_figures.py runs/demo docs/figures
