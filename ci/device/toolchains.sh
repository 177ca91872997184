#!/usr/bin/env bash
# The toolchain matrix on a lent GPU machine, with the measured loop's schedule: NVRTC 12.4,
# 12.8, 13.0 and 13.5 measured on the GPU (`xtask toolchains --gpu`), the GPU baselines of a
# copy of expectations/ re-blessed from the 13.0 run (so that they carry each loop's
# schedule digest and control fields), then every run compared and gated against that copy:
# the sass::<variant>::schedule cases and the first suspect of each red case. Runs from the
# repository root with the prebuilt binaries .device/new/probe and .device/new/xtask (no
# Rust there, no network).
#
#   bash ci/device/toolchains.sh --unpack FILE.tar.xz...  # carried toolchain folders, into $tc
#   bash ci/device/toolchains.sh                          # measure, bless the copy, compare, gate
#   bash ci/device/toolchains.sh --pack                   # $OUT/all into $OUT/all.tar.gz
#
# The NVRTC folders come as tarballs of what ci/toolchains.sh installs (each holds its
# INSTALLED file), made on a machine with the network:
#   ci/toolchains.sh --dir target/toolchains 12.4.127 12.8.93 13.5.37
#   tar -C target/toolchains -cJf target/device/nvrtc-12.8.93.tar.xz nvrtc-12.8.93   # and so on
# and carried in calls of their own (64 MiB a call), each unpacked with --unpack into
# $tc, which stays on the machine while it is held. 13.0 is the machine's own
# /usr/local/cuda/lib64.
set -u
out=${OUT:-/tmp/accprobe-out}
tc=${ACCPROBE_TOOLCHAINS:-$PWD/target/device-toolchains}
bin=$PWD/.device/new
case "${1:-}" in
  --pack)
    tar -C "$out" -czf "$out/all.tar.gz" all && rm -rf "$out/all"
    exit 0 ;;
  --unpack)
    shift
    mkdir -p "$tc"
    for f in "$@"; do tar -C "$tc" -xJf "$f" || exit 1; done
    ls -l "$tc" "$tc"/*/lib
    exit 0 ;;
esac
all=$out/all
mkdir -p "$all"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export ACCPROBE_TOOLCHAINS=$tc
for v in 12.4 12.8 13.5; do
  ls -d "$tc"/nvrtc-"$v".* > /dev/null 2>&1 || { echo "NVRTC $v is not in $tc: carry and --unpack it first" >&2; exit 2; }
done
{
  date -u; uname -r
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  ls /usr/local/cuda/lib64/libnvrtc.so* "$tc"
  nvdisasm --version | tail -1
} > "$all/env.txt" 2>&1
# A copy of the profiles: bless writes only into it, never into the checkout.
rm -rf "$all/expectations" && cp -r expectations "$all/expectations"
exp=$all/expectations
reference=/usr/local/cuda/lib64
# 1. The four toolchains on the GPU, judged against the copy as committed (its baselines
#    carry no schedule yet: the schedule cases say "no schedule digest blessed").
"$bin/xtask" toolchains --gpu --expectations "$exp" --profile h200 --out "$all/measured" \
  --toolchain 12.4 --toolchain 12.8 --toolchain "$reference" --toolchain 13.5 \
  > "$all/measured.log" 2>&1
echo "toolchains --gpu: exit $?" | tee -a "$all/env.txt"
r13=$(ls "$all"/measured/results-nvrtc*usr_local_cuda_lib64*.json | head -1)
# 2. The copy's GPU baselines re-blessed from the 13.0 run: progress and SASS as before,
#    now with each loop's schedule digest and control fields.
"$bin/xtask" bless --expectations "$exp" --profile h200 --from "$r13" > "$all/bless.log" 2>&1
echo "bless from $r13: exit $?" | tee -a "$all/env.txt"
cp "$exp/baselines/h200.yaml" "$all/h200-baselines-with-schedules.yaml"
# 3. Every run compared and gated against the re-blessed copy.
files=$(ls "$all"/measured/results-nvrtc*.json)
# shellcheck disable=SC2086
"$bin/xtask" toolchains --compare $files --expectations "$exp" --profile h200 \
  --out "$all/compared" > "$all/compare.log" 2>&1
echo "toolchains --compare: exit $?" | tee -a "$all/env.txt"
for f in $files; do
  name=$(basename "$f" .json)
  "$bin/xtask" gate --expectations "$exp" --profile h200 --results "$f" > "$all/gate-$name.txt" 2>&1
  echo "gate $name: exit $? $(grep -c 'sass::.*::schedule' "$all/gate-$name.txt") schedule lines" \
    | tee -a "$all/env.txt"
  for v in "7 1" "13 5" "29 16"; do
    # shellcheck disable=SC2086
    "$bin/xtask" sass --expectations "$exp" --results "$f" $v
  done > "$all/sass-$name.txt" 2>&1
done
# 4. The GPU suite itself under 12.4 against the copy: JUnit with the schedule cases and
#    each red case's first suspect.
ACCPROBE_NVRTC=12.4 ACCPROBE_EXPECTATIONS=$exp ACCPROBE_PROFILE=h200 \
  ACCPROBE_JUNIT=$all/probe-nvrtc12.4.junit.xml ACCPROBE_RESULTS=$all/probe-nvrtc12.4.json \
  "$bin/probe" > "$all/probe-nvrtc12.4.log" 2>&1
echo "probe under NVRTC 12.4: exit $? $(grep -h '^test result' "$all/probe-nvrtc12.4.log")" \
  | tee -a "$all/env.txt"
