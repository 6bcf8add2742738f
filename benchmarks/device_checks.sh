#!/usr/bin/env bash
# The checks to run in one call on a lent GPU machine, in order of need: torchvision's region
# ops against jaxpool's, the two programs of the ROI family's NCX transposes (layouts.py), the
# ResNet-18 training step, the training-scale benchmark in bf16, the detection benchmark, then
# the training-scale benchmark in f32 (the groups F32_ONLY matches, a regex; all by default).  Each step has its own time
# limit so that one that overruns leaves the next its time, and the benchmarks rewrite their
# results after every group, so a step stopped part-way keeps what it finished.
#
#   bash benchmarks/device_checks.sh OUT_DIR [SCALE]     # SCALE: training (default) or tiny
#
# The limits (seconds) are the variables below; set them in the environment to change them, to
# 0 to leave a step out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: device_checks.sh OUT_DIR [SCALE]}
scale=${2:-training}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# PyTorch's CUDA peers share the GPU with JAX in the same process.
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.6}
python=${PYTHON:-python3}
step() {  # step NAME LIMIT COMMAND...: run, append to OUT/log.txt, report the exit status
  local name=$1 limit=$2
  shift 2
  if [ "$limit" = 0 ]; then
    echo "$name: left out" | tee -a "$out/log.txt"
    return
  fi
  local start=$SECONDS
  echo "=== $name: $*" >>"$out/log.txt"
  timeout -s INT -k 10 "$limit" "$@" >>"$out/log.txt" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s (limit $limit s)" | tee -a "$out/log.txt"
}
"$python" -c 'import jax, torch; print("jax", jax.__version__, jax.devices(), "torch", torch.__version__)'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
step torchvision "${TV_LIMIT:-150}" "$python" benchmarks/torchvision_check.py --cases "${TV_CASES:-2}" \
  --json "$out/torchvision.json"
quick=()
[ "$scale" = tiny ] && quick=(--quick)
step layouts "${LAYOUTS_LIMIT:-100}" "$python" benchmarks/layouts.py "${quick[@]}" \
  --json "$out/layouts.json"
common=(--scale "$scale" --reps 5 --warmup 1 --compiles 1)
step resnet "${RESNET_LIMIT:-70}" "$python" benchmarks/training.py "${common[@]}" \
  --only resnet18 --json "$out/training_resnet.json"
step training_bf16 "${BF16_LIMIT:-160}" "$python" benchmarks/training.py "${common[@]}" \
  --dtype bf16 --no-resnet --json "$out/training_bf16.json" --plot "$out/training_bf16.png"
step detection "${DETECTION_LIMIT:-150}" "$python" benchmarks/detection.py "${quick[@]}" \
  --no-openvino --reps 5 --warmup 1 --compiles 1 --json "$out/detection_gpu.json" \
  --plot "$out/detection_gpu.png"
step training_f32 "${F32_LIMIT:-90}" "$python" benchmarks/training.py "${common[@]}" \
  --dtype f32 --no-resnet --only "${F32_ONLY:-.}" --json "$out/training_f32.json"
