#!/usr/bin/env bash
# Set up everything induction-cliff needs on a fresh Debian machine with Python >= 3.10:
# a virtual environment in .venv with the package (editable) and its dev tools, and Debian's
# chromium for static figure export (PDF/PNG/SVG through kaleido). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PYTHON" -m venv .venv
fi
# chromium is needed only for static export: when it cannot be installed (no root, no apt-get,
# the dpkg lock held by another install), say once how to install it and carry on.
chromium_hint="[setup] no chromium: figures will be HTML only (PDF/PNG need it); to get them run
[setup]   sudo apt-get install -y chromium   (or set BROWSER_PATH to a Chrome/Chromium executable)"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing Debian's chromium (for static figure export)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        >.venv/setup-apt.log 2>&1; then
      echo "[setup] apt-get install chromium failed (log: .venv/setup-apt.log; the last line:" \
           "$(tail -n 1 .venv/setup-apt.log))"
      echo "$chromium_hint"
    else
      rm -f .venv/setup-apt.log
    fi
  else
    echo "$chromium_hint"
  fi
fi

log=.venv/setup-pip.log
if ! .venv/bin/python -m pip install -q --upgrade pip >"$log" 2>&1; then cat "$log"; exit 1; fi
# torch is pinned here, in the same resolve as everything else, so pip takes the CPU build of
# 2.13.0 instead of pulling a multi-GB CUDA build. The package metadata itself only asks for a
# range (GPU users keep their torch).
echo "[setup] installing dependencies (torch==2.13.0 CPU, transformer-lens 4.x, ray, jupyterlab, devinterp, ...)"
# The ray extra is the distributed sweep backend; the tests run it on a local instance. The
# explorer extra (ipywidgets) is the attention explorer in JupyterLab; the notebook extra is
# JupyterLab with jupytext (scripts/notebooks.sh opens the notebooks); the llc extra (devinterp)
# estimates the local learning coefficient (`induction-cliff llc`); dev brings playwright, which
# the report's browser test uses to drive Debian's chromium (no browser download), and beartype,
# which checks jaxtyping's shape annotations at run time in the tests.
if ! .venv/bin/python -m pip install -q "torch==2.13.0" -e ".[dev,ray,slurm,explorer,notebook,llc]" >"$log" 2>&1; then
  cat "$log"; echo "[setup] pip install failed (log: $log)"; exit 1
fi
.venv/bin/python -c "import torch, transformer_lens, devinterp, beartype, interp, phenomenology; print('[setup] ok: torch', torch.__version__)"
