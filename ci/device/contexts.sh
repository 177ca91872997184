#!/usr/bin/env bash
# Measures the H200 profile's contexts (docs/study.md, "Contexts") on a lent GPU machine,
# with prebuilt binaries (no Rust there): the GPU suite binary .device/new/probe and
# .device/new/xtask, run from the repository root. Everything lands in $OUT/all/:
#
#   env.txt                 the machine, driver, clocks, and one line per suite run
#   contexts-wave-1.*       the suite in wave mode (the profile's): log, JUnit, results JSON;
#                           the results are what the H200 baselines are blessed from
#   contexts-warm-N.*       three more wave runs, warm (cache filled): the whole process's
#                           wall time per run in env.txt, and their JUnit files
#   contexts-serial-1.*     the suite in serial mode: log, JUnit, results JSON
#   agreement.json, agree.log   `xtask agree`: serial and wave medians per variant
#   bench.json, bench.log       `xtask bench`: GPU phase against its floor, cold and cached
#                               compile, medians of 5 runs
#
#   bash ci/device/contexts.sh            # then: bash ci/device/run.sh --pack
set -u
out=${OUT:-/tmp/accprobe-out}
probe=${PROBE:-.device/new/probe}
xtask=${XTASK:-.device/new/xtask}
mkdir -p "$out/all"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ACCPROBE_EXPECTATIONS=${ACCPROBE_EXPECTATIONS:-$PWD/expectations}
export ACCPROBE_PROFILE=h200 ACCPROBE_REQUIRE_GPU=1
run=$(dirname "$0")/run.sh
# The suite in the GPU job's form (the replays and the compile-only gate run in the host
# job): wave mode first (a cold compile cache), then warm, then serial.
job=(--skip replay:: --skip compile::)
ACCPROBE_MODE=wave bash "$run" "$probe" contexts-wave 1 "${job[@]}"
ACCPROBE_MODE=wave bash "$run" "$probe" contexts-warm 3 "${job[@]}"
ACCPROBE_MODE=serial bash "$run" "$probe" contexts-serial 1 "${job[@]}"
# Serial against wave, variant by variant, at the profile's tolerance.
"$xtask" agree --profile h200 --tolerance 0.005 --out "$out/all/agreement.json" \
  > "$out/all/agree.log" 2>&1
echo "agree: exit $?" | tee -a "$out/all/env.txt"
# The GPU phase against its floor (the floor counts the waves the matrix takes) and the
# compile of the whole matrix, cold and cached.
"$xtask" bench --profile h200 --runs 5 --out "$out/all/bench.json" > "$out/all/bench.log" 2>&1
echo "bench: exit $?" | tee -a "$out/all/env.txt"
