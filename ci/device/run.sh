#!/usr/bin/env bash
# Runs a prebuilt accprobe GPU suite binary on a lent GPU machine (no Rust toolchain there)
# and keeps what it produced: logs, results, JUnit, ptxas logs, CUBINs and their SASS.
#
#   bash ci/device/run.sh BINARY LABEL RUNS [extra suite arguments...]
#
# Environment passes through (ACCPROBE_MODE, ACCPROBE_PROFILE, ACCPROBE_EXTRA_OPTIONS,
# ACCPROBE_CACHE...). Files land in $OUT/all/LABEL-N.*; `bash ci/device/run.sh --pack`
# packs $OUT/all into $OUT/all.tar.gz (the device tool returns at most 8 files).
set -u
out=${OUT:-/tmp/accprobe-out}
if [ "${1:-}" = "--pack" ]; then
  tar -C "$out" -czf "$out/all.tar.gz" all && rm -rf "$out/all"
  exit 0
fi
bin=$1; label=$2; runs=$3; shift 3
mkdir -p "$out/all"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ACCPROBE_EXPECTATIONS=${ACCPROBE_EXPECTATIONS:-$PWD/expectations}
if [ ! -f "$out/all/env.txt" ]; then
  {
    date -u; uname -r
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks_event_reasons.active,temperature.gpu,power.draw --format=csv
    cat /proc/driver/nvidia/version 2>/dev/null
    ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
  } > "$out/all/env.txt" 2>&1
fi
for i in $(seq 1 "$runs"); do
  start=$(date +%s.%N)
  ACCPROBE_JUNIT=$out/all/$label-$i.junit.xml ACCPROBE_RESULTS=$out/all/$label-$i.json \
    "$bin" "$@" > "$out/all/$label-$i.log" 2>&1
  rc=$?
  echo "$label $i: exit $rc wall $(python3 -c "import time; print(round(time.time() - $start, 3))") s $(grep -h '^test result' "$out/all/$label-$i.log")" \
    | tee -a "$out/all/env.txt"
done
# The first run's CUBINs (one per NVRTC program: LABEL-1.cubin, LABEL-1.1.cubin, ...).
if [ -f "$out/all/$label-1.cubin" ] && [ ! -f "$out/all/$label.sass.txt" ]; then
  for cubin in "$out/all/$label-1.cubin" "$out/all/$label-1".[0-9]*.cubin; do
    [ -f "$cubin" ] && cuobjdump -sass "$cubin"
  done > "$out/all/$label.sass.txt" 2>&1
fi
