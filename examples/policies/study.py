#!/usr/bin/env python3
"""The study's accumulator-split rule (docs/study.md, "The heuristic") as a policy program.

It speaks accprobe-policy/1 (docs/policies.md): one JSON object per line on stdin, one
context each; one accumulator count K per line on stdout, in the same order. It is the
rule of expectations/policies/study.yaml written as code, the way a compiler's own
heuristic answers the gate:

- chains of at most 4 FMAs keep K = 1;
- otherwise K = 2;
- K = 4 only when the sink is isolated, the surrounding code has ILP to overlap, more
  partials cost no occupancy, and the register headroom pays one register per extra
  partial;
- never more partials than the chain feeds.

Standard library only. Any line it cannot read ends it with status 1 and the reason on
stderr, which the gate shows.
"""

import json
import sys

PROTOCOL = "accprobe-policy/1"
SHORT_CHAIN_MAX = 4
DEFAULT_ACCUMULATORS = 2
WIDE_ACCUMULATORS = 4
REGISTERS_PER_ACCUMULATOR = 1


def choose(c):
    chain = c["chain"]
    if chain <= SHORT_CHAIN_MAX:
        k = 1
    elif (
        c["sink_isolated"]
        and c["surrounding_ilp"]
        and c["occupancy_safe"]
        and c["register_headroom"]
        >= (WIDE_ACCUMULATORS - DEFAULT_ACCUMULATORS) * REGISTERS_PER_ACCUMULATOR
    ):
        k = WIDE_ACCUMULATORS
    else:
        k = DEFAULT_ACCUMULATORS
    return min(k, max(chain, 1))


def main():
    picks = []
    for number, line in enumerate(sys.stdin, start=1):
        try:
            c = json.loads(line)
        except ValueError as e:
            sys.exit(f"study.py: line {number}: not JSON: {e}")
        if c.get("protocol") != PROTOCOL:
            sys.exit(f"study.py: line {number}: protocol {c.get('protocol')!r}, expected {PROTOCOL}")
        picks.append(choose(c))
    sys.stdout.write("".join(f"{k}\n" for k in picks))


if __name__ == "__main__":
    main()
