#!/usr/bin/env bash
# The second H200 session of 2026-11-29: the multi-device refactor green on the real GPU
# (serial and wave), a CUDA error mid-run from a test profile, start-up timing, and
# nvdisasm against cuobjdump on the same CUBIN.
set -u
R=ci/device/run.sh
export ACCPROBE_CACHE=/tmp/acache
bash $R ./.device/probe final-serial 2
ACCPROBE_MODE=wave bash $R ./.device/probe final-wave 3
ACCPROBE_PROFILE=tests/data/faulty/launch-out-of-resources.yaml bash $R ./.device/probe faulty 1
c=$OUT/all/final-serial-1.cubin
TIMEFORMAT="cuobjdump -sass: %R s"; { time cuobjdump -sass $c > $OUT/all/cuobjdump.txt; } 2>> $OUT/all/env.txt
TIMEFORMAT="nvdisasm: %R s"; { time nvdisasm $c > $OUT/all/nvdisasm.txt; } 2>> $OUT/all/env.txt
grep -h "ready in" $OUT/all/*.log >> $OUT/all/env.txt
rm -f $OUT/all/final-serial-2.cubin $OUT/all/final-wave-*.cubin
bash $R --pack
