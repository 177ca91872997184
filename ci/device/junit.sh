#!/usr/bin/env bash
# Writes, on a GPU machine, the four JUnit files that tests/data/junit/ records, with the
# prebuilt GPU suite binary (no Rust toolchain there), and checks what they say with
# ci/check_viewers.py's standard-library checks (the renderers run in .ci/run):
#
#   bash ci/device/junit.sh [BINARY]        (default .device/new/probe)
#
# - red.xml: the GPU suite with ACCPROBE_EXTRA_OPTIONS=--maxrregcount=16 (its SASS changes:
#   each red case's message names the compiler and the option);
# - busy.xml: the GPU suite beside a PyTorch bf16 matmul loop on the same GPU (one failing
#   gpu::busy naming the python3 PID, the timing cases skipped "not judged: see gpu::busy");
# - no-device.xml: CUDA_VISIBLE_DEVICES= with ACCPROBE_REQUIRE_GPU=1 (gpu::required failing
#   with "cuInit: CUDA_ERROR_NO_DEVICE ...", the GPU cases skipped);
# - interrupted.xml: SIGTERM INTERRUPT_AFTER (0.6) s after the start, while it measures
#   (run::interrupted failing, the unfinished cases skipped).
#
# Each is the GPU suite only (`--skip replay:: --skip compile::`). Files land in
# $OUT/all/junit/: the four JUnit files, a log and a results file each, and junit.txt with
# each run's exit code and the checks' verdict. Copy the four .xml files over
# tests/data/junit/ and run .ci/run.
set -u
out=${OUT:-/tmp/accprobe-out}/all/junit
bin=${1:-.device/new/probe}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ACCPROBE_EXPECTATIONS=${ACCPROBE_EXPECTATIONS:-$PWD/expectations}
summary=$out/junit.txt
: > "$summary"
gpu_only=(--skip replay:: --skip compile::)

# run LABEL [VAR=VALUE...]: the suite with those variables, its JUnit file as LABEL.xml.
run() {
  local label=$1
  shift
  env "$@" ACCPROBE_JUNIT="$out/$label.xml" ACCPROBE_RESULTS="$out/$label.json" \
    "$bin" "${gpu_only[@]}" > "$out/$label.log" 2>&1
  echo "$label: exit $?" | tee -a "$summary"
}

{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } >> "$summary" 2>&1

run red ACCPROBE_EXTRA_OPTIONS=--maxrregcount=16

# A foreign load: a bf16 matmul loop, started before the suite and ready once its first
# product is done.
ready=$out/torch-ready
rm -f "$ready"
python3 - "$ready" > "$out/torch.log" 2>&1 <<'PY' &
import pathlib, sys, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
(a @ b).sum().item()
pathlib.Path(sys.argv[1]).touch()
while True:
    a = (a @ b) * 1e-4
    torch.cuda.synchronize()
PY
load=$!
for _ in $(seq 1 600); do
  [ -f "$ready" ] && break
  kill -0 "$load" 2>/dev/null || break
  sleep 0.1
done
if [ -f "$ready" ]; then
  echo "busy: torch load PID $load running" | tee -a "$summary"
  run busy
else
  echo "busy: the torch load did not start (see torch.log)" | tee -a "$summary"
fi
kill "$load" 2>/dev/null
wait "$load" 2>/dev/null

run no-device CUDA_VISIBLE_DEVICES= ACCPROBE_REQUIRE_GPU=1

ACCPROBE_JUNIT=$out/interrupted.xml ACCPROBE_RESULTS=$out/interrupted.json \
  "$bin" "${gpu_only[@]}" > "$out/interrupted.log" 2>&1 &
pid=$!
sleep "${INTERRUPT_AFTER:-0.6}"
kill -TERM "$pid" 2>/dev/null
wait "$pid"
echo "interrupted: exit $? (143 when SIGTERM ended it)" | tee -a "$summary"

python3 ci/check_viewers.py "$out" "$out/check" - 2>&1 | tee -a "$summary"
