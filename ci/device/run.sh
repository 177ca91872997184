#!/usr/bin/env bash
# Runs a prebuilt accprobe GPU suite binary on a lent GPU machine (no Rust toolchain there)
# and collects what comes back: logs, results, JUnit, ptxas log, CUBIN and its SASS.
# Usage: bash ci/device/run.sh BINARY RUNS [PROFILE]   (writes under $OUT)
set -u
bin=$1; runs=${2:-1}; profile=${3:-}
out=${OUT:-/tmp/accprobe-out}; mkdir -p "$out/all"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ACCPROBE_EXPECTATIONS=$PWD/expectations
[ -n "$profile" ] && export ACCPROBE_PROFILE=$profile
{
  date -u; uname -r
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks_event_reasons.active,temperature.gpu,power.draw --format=csv
  cat /proc/driver/nvidia/version 2>/dev/null
  ls /usr/local/cuda/lib64/libnvrtc* 2>/dev/null
} > "$out/all/env.txt" 2>&1
for i in $(seq 1 "$runs"); do
  start=$(date +%s.%N)
  ACCPROBE_JUNIT=$out/all/junit$i.xml ACCPROBE_RESULTS=$out/all/results$i.json \
    "$bin" > "$out/all/run$i.log" 2>&1
  echo "run $i: exit $? wall $(python3 -c "import time; print(round(time.time() - $start, 2))") s" | tee -a "$out/all/env.txt"
done
if [ -f "$out/all/results1.cubin" ]; then
  cuobjdump -sass "$out/all/results1.cubin" > "$out/all/sass.txt" 2>&1 || nvdisasm "$out/all/results1.cubin" > "$out/all/sass.txt" 2>&1
fi
tar -C "$out" -czf "$out/all.tar.gz" all && rm -rf "$out/all"
