#!/usr/bin/env bash
# Regenerate the README's figures (docs/figures/*.png) from runs/demo, training the demo first
# (scripts/demo.sh) when it is not there, and the K x B phase diagram from the fig2-kb-quick sweep
# (runs/fig2-kb; about 6 minutes on 2 cores when it is not there). Needs chromium for PNG export.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled
[ -f runs/demo/metrics.csv ] || bash scripts/demo.sh
[ -f runs/demo/fit.json ] || .venv/bin/induction-cliff fit runs/demo
.venv/bin/python scripts/docs_figures.py runs/demo docs/figures
# The sweep resumes (or skips) what is there, then redraws its figures.
.venv/bin/induction-cliff sweep --preset fig2-kb-quick --out runs/fig2-kb --formats png
cp runs/fig2-kb/figures/phase_diagram.png docs/figures/fig2_kb_quick_phase_diagram.png
