#!/usr/bin/env bash
# Set up, then train the `demo` preset (a real run that shows the plateau and the jump, a few
# minutes on 2 cores) and write its figures and report. Output: runs/demo, runs/demo/figures and
# runs/demo/report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled
.venv/bin/induction-cliff train --preset demo --out runs/demo --overwrite
.venv/bin/induction-cliff transition runs/demo
.venv/bin/induction-cliff fit runs/demo
# PDF/PNG need chromium; without it (setup.sh said how to install it) the figures are HTML.
formats=pdf,png
if ! .venv/bin/python -c "import sys; from interp.viz.export import find_chromium as f; sys.exit(f() is None)" \
    >/dev/null 2>&1; then
  formats=html
fi
.venv/bin/induction-cliff figures runs/demo --out runs/demo/figures --formats "$formats"
.venv/bin/induction-cliff report runs/demo
echo "demo figures are in $(pwd)/runs/demo/figures; the report is $(pwd)/runs/demo/report.html"
