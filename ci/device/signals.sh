#!/usr/bin/env bash
# Sends termination signals to a prebuilt accprobe GPU suite binary at a sweep of moments and
# checks the harness contract each time (docs/harness.md, "Interrupted runs"): the process
# exits 128 + the signal, and its JUnit file is well-formed and red (a failing
# `run::interrupted` case) and lists either nothing but that case (signal before the plan) or
# every planned case (finished, or skipped "not finished: interrupted by SIG..."). A run that
# had already decided to end when the signal came (its last look for a pending signal is
# immediately before `_exit`; the kernel may then take milliseconds to tear the process down)
# exits 0, and is right only if its green JUnit file was written before the signal: the
# file's time is compared with the signal's (both CLOCK_REALTIME).
#
#   bash ci/device/signals.sh BINARY LABEL "SIGNALS" "DELAYS" [extra suite arguments...]
#
# SIGNALS are names (`INT TERM HUP QUIT USR1`), or two joined by `+` (`TERM+INT`: the second
# 50 ms after the first, as a CI that cancels twice), DELAYS seconds (`0 0.02 0.05 0.2 0.5`). One
# line per run lands in $OUT/all/LABEL.txt, the JUnit file of each run beside it; the last
# line counts the runs that broke the contract. Exits 1 when any did.
set -u
# Job control on, so that the suite starts with SIGINT and SIGQUIT as a terminal or CI runner
# leaves them (without it, bash starts background jobs with both ignored).
set -m
out=${OUT:-/tmp/accprobe-out}
bin=$1; label=$2; signals=$3; delays=$4; shift 4
mkdir -p "$out/all"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ACCPROBE_EXPECTATIONS=${ACCPROBE_EXPECTATIONS:-$PWD/expectations}
log=$out/all/$label.txt
: > "$log"
broken=0 runs=0
for sig in $signals; do
  first=${sig%%+*} second=${sig#*+}
  [ "$second" = "$sig" ] && second=
  num=$(kill -l "$first")
  for delay in $delays; do
    runs=$((runs + 1))
    junit=$out/all/$label-$sig-$delay.junit.xml
    rm -f "$junit"
    ACCPROBE_JUNIT=$junit ACCPROBE_RESULTS=$out/all/$label-sweep.json \
      "$bin" "$@" > /dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    # sent: 1 when the signal reached the process, 0 when it had ended before.
    # A process that has called _exit still takes kill(2) while the kernel tears it down
    # (PF_EXITING in its flags: closing a GPU context's files takes milliseconds) and once it
    # is a zombie: that is a run that ended before the signal, not one the signal ended.
    exiting=$(awk '{print ($3 == "Z" || int($9 / 4) % 2) ? 1 : 0}' "/proc/$pid/stat" 2>/dev/null)
    # The moment the signal went, on the clock file times are read from (CLOCK_REALTIME).
    at=$(date +%s.%N)
    if [ "$exiting" = 0 ] && kill -s "$first" "$pid" 2>/dev/null; then sent=1; else sent=0; fi
    if [ -n "$second" ]; then sleep 0.05; kill -s "$second" "$pid" 2>/dev/null; fi
    wait "$pid"
    rc=$?
    verdict=$(python3 - "$junit" "$rc" "$num" "$sent" "$at" <<'PY'
import os, sys, xml.etree.ElementTree as ET
path, rc, num, sent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
signal_at = float(sys.argv[5])
# File times come from the kernel's coarse clock, at most one tick (4 ms at HZ=250, 10 ms
# at HZ=100) behind the clock `date` reads: a file is proved written before the signal
# when its time is more than GRAIN before it.
GRAIN = 0.010
problems = []
before = None
lead = None
if rc == 0:
    try:
        lead = signal_at - os.stat(path).st_mtime
    except FileNotFoundError:
        pass
    # Whether or not the signal reached it, a run that ended 0 wrote its green file before
    # the signal went: one written after it would be a green run the signal should have
    # ended.
    if lead is not None and lead < 0:
        problems.append(f"exit 0 and a JUnit file written {-lead * 1000:.1f} ms after the signal")
if sent and rc == 0:
    # The process had decided to end (its last look for a pending signal was done) when
    # the signal came, and ended 0: green is right only if its final JUnit file was
    # written before the signal was sent.
    if lead is not None:
        before = f"green JUnit written {lead * 1000:.1f} ms before the signal"
        if 0 <= lead <= GRAIN:
            problems.append(f"exit 0 and a JUnit file written {lead * 1000:.1f} ms before the signal, within the file clock's {GRAIN * 1000:.0f} ms: not proved")
elif sent and rc != 128 + num:
    problems.append(f"exit {rc}, not {128 + num}")
cases = failed = unfinished = 0
interrupted = False
try:
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        cases += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            if case.get("name", "").endswith("interrupted"):
                interrupted = True
        skipped = case.find("skipped")
        if skipped is not None and "not finished: interrupted" in (skipped.get("message") or ""):
            unfinished += 1
except FileNotFoundError:
    problems.append("no JUnit file")
except ET.ParseError as e:
    problems.append(f"JUnit not well-formed: {e}")
# A run that ended before the signal was due is an ordinary run (ci/device/run.sh judges
# those); a signalled one must be red.
if sent and not interrupted and before is None:
    problems.append("no failing run::interrupted case")
if before is not None and interrupted:
    problems.append("exit 0 with a failing run::interrupted case")
if problems:
    state = "BROKEN: " + "; ".join(problems)
elif before is not None:
    state = f"ended as the signal came: {before}"
elif sent:
    state = "ok"
elif lead is not None:
    state = f"ended before the signal: green JUnit written {lead * 1000:.1f} ms before it"
else:
    state = "ended before the signal"
print(f"exit {rc} cases {cases} failed {failed} unfinished {unfinished} {state}")
PY
)
    echo "$label $sig after ${delay}s: $verdict" | tee -a "$log"
    case "$verdict" in *BROKEN*) broken=$((broken + 1)) ;; esac
    # Children die with the run (SIGKILL from the kernel when it ends): give the kernel a
    # moment, then count those still running (zombies waiting for init are not).
    sleep 0.3
    left=$(ps -C nvdisasm -o stat= | grep -vc '^Z')
    [ "$left" -eq 0 ] || { echo "$label $sig after ${delay}s: $left nvdisasm left running" | tee -a "$log"; broken=$((broken + 1)); }
  done
done
echo "$label: $runs runs, $broken broke the contract" | tee -a "$log"
[ "$broken" -eq 0 ]
