#!/usr/bin/env bash
# Onboards the GPU of a lent machine as a team without its profile would (no Rust
# toolchain there; prebuilt binaries), and keeps what proves that it works:
#
#   bash ci/device/onboard.sh [XTASK [PROBE]]     (default .device/new/xtask, .device/new/probe)
#
# 1. copies expectations/ to a scratch folder without the H200's profile, baselines and
#    recorded results: the H200 is then a GPU no profile names;
# 2. runs `xtask onboard` there (the study's probe with its contexts, serially, as a
#    wave, then $ONBOARD_RUNS more runs, default 30, in the mode it chooses; draft profile
#    with contexts and wider baselines, baselines, recorded results, and the measurements
#    it drafted from), and keeps the folder;
# 3. runs the suite with the draft 20 times in a row (ci/device/run.sh);
# 4. runs `xtask onboard` a second time, which must refuse (exit 1, naming the file);
# 5. measures the ceilings 3 times against the committed profiles (h200.yaml's
#    typed-in figures);
# 6. compares the draft with the committed h200.yaml (`xtask onboard --compare`).
#
# Everything lands in $OUT/all/onboard/; summary.txt has one line per step with its
# exit code. `bash ci/device/run.sh --pack` packs $OUT/all afterwards.
set -u
xtask=$(realpath "${1:-.device/new/xtask}")
probe=$(realpath "${2:-.device/new/probe}")
out=${OUT:-/tmp/accprobe-out}
here=$out/all/onboard
mkdir -p "$here"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
summary=$here/summary.txt
note() { echo "$*" | tee -a "$summary"; }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  # onboard refuses under CI, as bless does: say so here if any of its variables is set.
  env | grep -E '^(CI|GITHUB_ACTIONS|GITLAB_CI|BUILDKITE|JENKINS_URL|TF_BUILD)=' || echo "no CI variable set"
} > "$here/env.txt" 2>&1

# 1. A copy without the H200.
scratch=$(mktemp -d)
cp -r expectations "$scratch/expectations"
rm -f "$scratch/expectations/h200.yaml" "$scratch"/expectations/baselines/h200*.yaml \
  "$scratch"/expectations/recorded/h200-*.json
ls -R "$scratch/expectations" > "$here/scratch-before.txt"

# 2. Onboard.
"$xtask" --expectations "$scratch/expectations" onboard --out "$here/measured" \
  --runs "${ONBOARD_RUNS:-30}" > "$here/onboard-1.log" 2>&1
note "onboard 1: exit $?"
cp -r "$scratch/expectations" "$here/expectations"
# The drafted profile: the one *.yaml there besides the study's.
draft=$(ls "$here"/expectations/*.yaml | grep -v '/documented\.yaml$' | head -1)
note "draft: ${draft:-none}"

# 3. The suite with the draft, 20 runs.
ACCPROBE_EXPECTATIONS=$scratch/expectations ACCPROBE_REQUIRE_GPU=1 OUT=$here/suite \
  bash ci/device/run.sh "$probe" draft 20
grep -h '^draft ' "$here/suite/all/env.txt" >> "$summary"

# 4. A second onboarding refuses.
"$xtask" --expectations "$scratch/expectations" onboard --out "$here/measured-2" \
  > "$here/onboard-2.log" 2>&1
note "onboard 2: exit $? (must be 1): $(grep -m1 -E 'never overwrites|already names GPU' "$here/onboard-2.log")"
cmp -s "$scratch/expectations/$(basename "${draft:-none}")" "${draft:-/nonexistent}"
note "onboard 2: draft unchanged: $([ $? = 0 ] && echo yes || echo NO)"

# 5. The ceilings, 3 times, against the committed h200.yaml.
for i in 1 2 3; do
  "$xtask" --expectations "$PWD/expectations" ceilings --out "$here/ceilings-$i.json" \
    > "$here/ceilings-$i.log" 2>&1
  note "ceilings $i: exit $? $(grep -h '^profile ' "$here/ceilings-$i.log")"
done

# 6. The draft against the hand-written profile.
"$xtask" onboard --compare "${draft:-/nonexistent}" --against "$PWD/expectations/h200.yaml" \
  > "$here/compare.log" 2>&1
note "compare: exit $? $(grep -h '^verdict' "$here/compare.log")"
rm -rf "$scratch"
