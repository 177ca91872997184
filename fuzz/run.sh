#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 300), two at a time, on the seed corpora in
# fuzz/corpus/ (what the fuzzer finds is added there). Needs cargo-fuzz; on a stable
# toolchain it sets RUSTC_BOOTSTRAP=1 for the sanitizer flags.
set -u
cd "$(dirname "$0")"
secs=${1:-300}
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O || exit 1
run() { cargo fuzz run -O "$1" "corpus/$1" -- -max_total_time="$secs" -rss_limit_mb=2048 > "target/fuzz-$1.log" 2>&1; echo "$1: exit $? $(grep -E '^Done|stat::number_of_executed_units' "target/fuzz-$1.log" | tail -1)"; }
mkdir -p target
for pair in "profile policy" "ptxas sass" "results junit"; do
  set -- $pair
  run "$1" & run "$2" & wait
done
