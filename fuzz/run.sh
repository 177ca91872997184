#!/usr/bin/env bash
# Fuzzes every target (or the TARGETs named) for SECONDS each (default 300), FUZZ_JOBS at
# a time (default 2), then minimises each corpus with `cargo fuzz cmin` and prints one line
# per target: seconds, executions, corpus size, new crashes.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# The corpus (fuzz/corpus/<target>/) and crashes (fuzz/artifacts/<target>/) are not kept
# in git: the corpus regrows from the named seeds in fuzz/seeds/ (read-only inputs to every
# run) on the first run and grows with each later one. Builds with debug assertions and
# overflow checks on (see [profile.release] in Cargo.toml). Installs the pinned cargo-fuzz
# when it is missing; on a stable toolchain it sets RUSTC_BOOTSTRAP=1 for the sanitizer
# flags.
set -u
cd "$(dirname "$0")"
secs=${1:-300}
shift $(($# > 0 ? 1 : 0))
jobs=${FUZZ_JOBS:-2}
cargo_fuzz_version=0.13.1
export RUSTC_BOOTSTRAP=1
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $cargo_fuzz_version" ]; then
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked || exit 1
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
# The same flags for build, run and cmin: anything else rebuilds.
flags=(--debug-assertions)
cargo fuzz build "${flags[@]}" || exit 1

# The seed folders of a target: its own, and the results files for the targets that read
# results.
seeds() {
  [ -d "seeds/$1" ] && echo "seeds/$1"
  case $1 in verdict | bless) echo seeds/results ;; esac
}

crashes() { find "artifacts/$1" -type f 2>/dev/null | wc -l; }

run() {
  local t=$1 log=target/fuzz-$1.log before start=$SECONDS
  before=$(crashes "$t")
  mkdir -p "corpus/$t"
  # shellcheck disable=SC2046 # one folder per word
  cargo fuzz run "${flags[@]}" "$t" "corpus/$t" $(seeds "$t") -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
  local rc=$? took=$((SECONDS - start))
  cargo fuzz cmin "${flags[@]}" "$t" "corpus/$t" -- -rss_limit_mb=2048 >"target/cmin-$t.log" 2>&1
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  # After a crash there are no final stats: the last status line's count.
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  printf '%-8s exit %-3s %6ss %12s executions %6s corpus files %3s new crashes\n' \
    "$t" "$rc" "$took" "${execs:-?}" "$(find "corpus/$t" -type f | wc -l)" \
    "$(($(crashes "$t") - before))"
}

mkdir -p target
running=0
for t in "${targets[@]}"; do
  run "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
