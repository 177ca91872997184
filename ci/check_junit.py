#!/usr/bin/env python3
"""Checks the GPU suite's JUnit file with two independent readers; run by .ci/run.

    python3 ci/check_junit.py JUNIT XSD LOG

1. junitparser (PyPI) reads every suite and case: the counts of cases, failures and skips
   must agree with what the run printed for tests/probe.rs in LOG (cargo test's output),
   the replay suites must be there, and every skipped or failing case must say why (a
   `message` attribute or a body).
2. xmlschema (PyPI) validates the file against Jenkins' JUnit schema (junit-10.xsd of the
   xunit plugin, the one pytest checks its own JUnit against; XSD is its path). The schema
   predates a few attributes that quick-junit and cargo-nextest write on the root
   `<testsuites>` (`skipped`, `disabled`, `uuid`, `timestamp`): those are reported and
   removed before validating; everything else must be valid as it stands. The number of
   `<testcase>` elements the schema reader decoded must equal junitparser's count.

Exits 1 with every problem listed when a check fails.
"""
import re
import sys
import xml.etree.ElementTree as ET

import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped

# Attributes on <testsuites> that junit-10.xsd does not know but common writers emit
# (quick-junit, hence accprobe and cargo-nextest) and every CI reader ignores or uses.
ROOT_EXTRAS = ("skipped", "disabled", "uuid", "timestamp")


def run_counts(log_path):
    """What cargo test printed for tests/probe.rs: (passed, failed, ignored)."""
    log = open(log_path, encoding="utf-8", errors="replace").read()
    start = log.find("Running tests/probe.rs")
    if start < 0:
        sys.exit(f"{log_path}: no 'Running tests/probe.rs' block: did the suite run?")
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", log[start:])
    if not m:
        sys.exit(f"{log_path}: no libtest result line after 'Running tests/probe.rs'")
    return tuple(map(int, m.groups()))


def read_junitparser(path, problems):
    """Reader 1: junitparser. Returns (suite names, cases, failures, skipped)."""
    xml = JUnitXml.fromfile(path)
    names, total, failures, skipped = [], 0, 0, 0
    for suite in xml:
        names.append(suite.name)
        for case in suite:
            total += 1
            results = list(case.result)
            kinds = {type(r) for r in results}
            failures += bool(kinds & {Failure, Error})
            skipped += Skipped in kinds
            for r in results:
                if isinstance(r, (Failure, Error, Skipped)) and not (r.message or r.text):
                    problems.append(
                        f"{suite.name}: {case.name}: <{r._tag}> says neither message nor body"
                    )
    return names, total, failures, skipped


def read_schema(path, xsd, problems):
    """Reader 2: xmlschema against the JUnit XSD. Returns the number of testcases."""
    schema = xmlschema.XMLSchema(xsd)
    root = ET.parse(path).getroot()
    extras = [a for a in ROOT_EXTRAS if a in root.attrib]
    for a in extras:
        del root.attrib[a]
    errors = list(schema.iter_errors(root))
    for e in errors[:10]:
        problems.append(f"XSD: {e.path}: {e.reason}")
    if len(errors) > 10:
        problems.append(f"XSD: ... and {len(errors) - 10} more schema errors")
    cases = 0
    if not errors:
        decoded = schema.to_dict(root)
        for suite in decoded.get("testsuite", []):
            cases += len(suite.get("testcase", []))
    return cases, extras, len(errors)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, xsd, log = sys.argv[1:]
    problems = []
    names, total, failures, skipped = read_junitparser(path, problems)
    passed, failed, ignored = run_counts(log)
    print(
        f"junitparser: {len(names)} suites {names}, {total} cases, {failures} failures, "
        f"{skipped} skipped; the run printed {passed} passed, {failed} failed, {ignored} ignored"
    )
    for want in ("replay documented", "replay h200"):
        if want not in names:
            problems.append(f"no suite {want!r}")
    if total != passed + failed + ignored:
        problems.append(f"{total} cases in the file, {passed + failed + ignored} in the run")
    if failures != failed:
        problems.append(f"{failures} failures in the file, {failed} in the run")
    if skipped != ignored:
        problems.append(f"{skipped} skipped in the file, {ignored} ignored in the run")

    cases, extras, n_errors = read_schema(path, xsd, problems)
    note = f" (ignoring <testsuites> attributes it predates: {', '.join(extras)})" if extras else ""
    print(f"xmlschema: {n_errors} errors against {xsd}{note}, {cases} testcases")
    if n_errors == 0 and cases != total:
        problems.append(f"the schema reader decoded {cases} testcases, junitparser {total}")

    for p in problems:
        print(f"junit: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("junit: both readers agree with the run")


if __name__ == "__main__":
    main()
