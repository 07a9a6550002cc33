#!/usr/bin/env bash
# The GPU checks, in one call on a machine with CUDA and PyTorch (and no network):
#
#   bash benchmarks/gpu_check.sh          # logs under $OUT (default /tmp/gpu-check)
#
# 1. equality: the fast path, the hooked model and a stack of seeds on the GPU against the hooked
#    model on the CPU (benchmarks/gpu_equality.py);
# 2. bench_many's GPU rows: stacks of 1/8/64/256 models, with sampling in the step and presampled;
# 3. one paper-fig3 run of 2000 steps trained on the GPU with `train` (timed, metrics kept);
# 4. the protocol on the GPU: bench_protocol --quick with all six seeds stacked in one worker
#    (slices of 300 and 1800 steps, extrapolated to 6 x 1e5 and labelled so);
# 5. data drawn on the device (sample_on=device): sampling, step, the compiled step (and its
#    compile), evaluation and end to end for stacks of 1, 16, 64 and 256 paper-fig3 models
#    (benchmarks/bench_device.py --compiled), and one run trained with `--set sample_on=device`.
#
#   bash benchmarks/gpu_check.sh --dry    # the device rows' CPU-side check, no GPU needed:
#                                         # bench_device --dry (the device sampler, the step and
#                                         # the compiled step at 1, 16, 64 and 256 models, one
#                                         # step each) and a 20-step CPU run with sample_on=device
# Python packages the machine lacks (transformer-lens and the few it imports that are not there)
# travel as wheels in .whl/ (benchmarks/results/gpu-h200-2026-11-30/README.md says how to get
# them); they are installed to /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
DRY=0
[ "${1:-}" = "--dry" ] && DRY=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "gpu_check: installing .whl/ failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 WANDB_MODE=disabled
export PYTHONUNBUFFERED=1
if [ "$DRY" = 1 ]; then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 WANDB_MODE=disabled
  PY=${PYTHON:-python3}
  rc=0
  $PY benchmarks/bench_device.py --dry 2>&1 | tee "$OUT/device_rows.txt" || rc=1
  rm -rf "$OUT/device-train"
  $PY -m interp.cli train --preset tiny --set sample_on=device --set steps=20 --set eval_every=10 \
    --quiet --out "$OUT/device-train" || rc=1
  echo "gpu_check --dry: exit $rc"
  exit $rc
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv \
  2>&1 | tee "$OUT/gpu.txt"
python3 -c "import torch, interp.model.network as n; print('torch', torch.__version__, \
torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())" 2>&1 | tee -a "$OUT/gpu.txt" \
  || { echo "gpu_check: the toolkit does not import here"; exit 1; }

status=0
step() {  # step NAME SECONDS COMMAND...: run it with a time limit, log it, remember a failure
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  [ "$rc" = 0 ] || status=1
}
step equality 180 python3 benchmarks/gpu_equality.py
step bench_many 300 python3 benchmarks/bench_many.py --gpu-only --quick
step train 150 python3 -m interp.cli train --preset paper-fig3 --set device=cuda --set steps=2000 \
  --quiet --out /tmp/gpu-check-train
cp /tmp/gpu-check-train/metrics.csv "$OUT/train_metrics.csv" 2>/dev/null
step protocol 300 python3 benchmarks/bench_protocol.py --quick --workers 1 --stack 6 --device cuda
step device_rows 540 python3 benchmarks/bench_device.py --device cuda --stacks 1,16,64,256 --compiled
step device_train 150 python3 -m interp.cli train --preset paper-fig3 --set device=cuda \
  --set sample_on=device --set steps=2000 --quiet --out /tmp/gpu-check-device-train
cp /tmp/gpu-check-device-train/metrics.csv "$OUT/device_train_metrics.csv" 2>/dev/null
cat "$OUT/summary.txt"
exit $status
