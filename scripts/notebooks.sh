#!/usr/bin/env bash
# Open the notebooks in JupyterLab: notebooks/*.py (jupytext py:percent) open as notebooks with a
# double click. Sets up .venv first if needed. Extra arguments go to `jupyter lab`
# (e.g. --no-browser --port 8890).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/jupyter-lab ] || bash scripts/setup.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled
# JupyterLab's default viewer for Python files becomes jupytext's notebook view, for this
# environment only (.venv/share/jupyter/lab/settings; your own JupyterLab settings are untouched).
settings=.venv/share/jupyter/lab/settings
mkdir -p "$settings"
cat >"$settings/overrides.json" <<'JSON'
{
  "@jupyterlab/docmanager-extension:plugin": {
    "defaultViewers": {"python": "Jupytext Notebook"}
  }
}
JSON
# The notebooks reuse runs/demo when `bash scripts/demo.sh` has trained it, and write their own
# runs under runs/notebooks. JupyterLab serves notebooks/, whose jupytext.toml it reads (jupytext
# looks for it up to the folder served): a save pairs each script with a git-ignored .ipynb and
# changes the script only where its cells changed.
cd notebooks
root=()
[ "$(id -u)" = 0 ] && root=(--allow-root)  # JupyterLab refuses to run as root without it
exec ../.venv/bin/jupyter lab "${root[@]}" "$@"
