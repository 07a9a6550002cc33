#!/usr/bin/env bash
# Set up everything induction-cliff needs on a fresh Debian machine with Python >= 3.10:
# a virtual environment in .venv with the package (editable) and its dev tools, and Debian's
# chromium for static figure export (PDF/PNG/SVG through kaleido). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing Debian's chromium (for static figure export)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "[setup] WARNING: chromium not found and cannot apt-get it here; PDF/PNG/SVG export will" \
         "fail with instructions (HTML export still works). Install it with: apt-get install -y chromium"
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PYTHON" -m venv .venv
fi
log=.venv/setup-pip.log
if ! .venv/bin/python -m pip install -q --upgrade pip >"$log" 2>&1; then cat "$log"; exit 1; fi
# torch is pinned here, in the same resolve as everything else, so pip takes the CPU build of
# 2.13.0 instead of pulling a multi-GB CUDA build. The package metadata itself only asks for a
# range (GPU users keep their torch).
echo "[setup] installing dependencies (torch==2.13.0 CPU, transformer-lens 4.x, ray, devinterp, ...)"
# The ray extra is the distributed sweep backend; the tests run it on a local instance. The llc
# extra (devinterp) estimates the local learning coefficient (`induction-cliff llc`).
if ! .venv/bin/python -m pip install -q "torch==2.13.0" -e ".[dev,ray,llc]" >"$log" 2>&1; then
  cat "$log"; echo "[setup] pip install failed (log: $log)"; exit 1
fi
.venv/bin/python -c "import torch, transformer_lens, devinterp, interp, phenomenology; print('[setup] ok: torch', torch.__version__)"
