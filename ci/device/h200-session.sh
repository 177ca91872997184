#!/usr/bin/env bash
# The H200 session of 2026-11-29 (issues 2-7): green check in both modes, the red
# demonstration, serial/wave agreement, the benchmark, the probe command and a 20-run soak.
# Binaries built on the development machine are in .device/ (probe = GPU suite, xtask).
set -u
R=ci/device/run.sh
export ACCPROBE_CACHE=/tmp/acache
bash $R ./.device/probe green-serial 1
ACCPROBE_MODE=wave bash $R ./.device/probe green-wave 3
ACCPROBE_EXTRA_OPTIONS="--maxrregcount=16" bash $R ./.device/probe red-maxrreg16 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
./.device/xtask --expectations expectations agree --out $OUT/all/agreement.json > $OUT/all/agree.log 2>&1; echo "agree exit $?" >> $OUT/all/env.txt
./.device/xtask --expectations expectations bench --runs 5 --out $OUT/all/bench.json > $OUT/all/bench.log 2>&1; echo "bench exit $?" >> $OUT/all/env.txt
./.device/xtask --expectations expectations probe --out $OUT/all/probe.json > $OUT/all/probe.log 2>&1; echo "probe exit $?" >> $OUT/all/env.txt
bash $R ./.device/probe soak 20
for i in $(seq 2 20); do rm -f $OUT/all/soak-$i.cubin $OUT/all/soak-$i.ptxas.log; done
bash $R --pack
