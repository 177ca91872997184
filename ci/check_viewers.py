#!/usr/bin/env python3
"""Renders recorded JUnit files as CI users see them and checks what they show; run by .ci/run.

    python3 ci/check_viewers.py JUNIT_DIR OUT_DIR NODE_MODULES
    python3 ci/check_viewers.py JUNIT_DIR OUT_DIR -     (no renderers: steps 1 and 5 only,
                                                         with the standard library alone)

JUNIT_DIR holds red.xml, busy.xml, no-device.xml and interrupted.xml (tests/data/junit/,
README.md there says how they were made). For each file:

1. The messages, as the GitHub job summary (at most 200 characters of a message), GitLab,
   dorny/test-reporter and mikepenz/action-junit-report show them: none longer than 200
   characters, none with the old " [...]" cut, none cut inside a word (a message that ends
   in "…" stops where its body's text has a space or a comma, semicolon, colon or
   parenthesis before one), and a red case whose body names a first
   suspect carries that suspect's head whole in its message; in red.xml every `probe::`
   failure has one. No text XML writes as an entity (Allure prints `&gt;`, `&apos;` as
   they are).
   The sum of each suite's case times must stay close to the suite's time, as junit2html,
   GitLab and junitparser add them up (at most twice it, plus 0.1 s: each case's time is
   its own work, the shared measurement a case of its own).
2. junit2html (PyPI, pinned in .ci/run) reads and renders it to OUT_DIR; it counts
   `<error>` as failed, so a busy run must give it exactly one failure (`gpu::busy`).
3. xunit-viewer (npm, ci/node) renders it to OUT_DIR.
4. The GitHub job summary as users get it from junit-to-ctrf feeding github-actions-ctrf
   (npm, ci/node; the action's own code, run with placeholder GITHUB_ variables): the
   Markdown written to GITHUB_STEP_SUMMARY must stay within GitHub's 1 MiB limit for one
   step's summary, and the CTRF summary of busy.xml must count one failure.
5. What each run must say: busy.xml's `gpu::busy` names a PID and process and its other
   cases are skipped "not judged: see gpu::busy"; no-device.xml's `gpu::required` names the
   driver call in plain words (no Rust Debug text, at most one "but"); interrupted.xml's
   `run::interrupted` counts "N cases finished, M did not", says why the run is not green,
   and has no parenthesis when nothing was left unfinished.

Exits 1 with every problem listed when a check fails.
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

MESSAGE_CHARS = 200
SUMMARY_LIMIT = 1024 * 1024  # GitHub: a step's job summary is at most 1 MiB.
SUSPECT = "first suspect: "
DETAIL = " — "
FILES = ("red.xml", "busy.xml", "no-device.xml", "interrupted.xml")


def suspect_head(body):
    for line in body.splitlines():
        if line.startswith(SUSPECT):
            return line.split(DETAIL)[0]
    return None


def cases(path):
    """(suite, case name, tag, message, body) of every case that did not pass."""
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            for el in case:
                if el.tag in ("failure", "error", "skipped"):
                    yield suite.get("name"), case.get("name"), el.tag, el.get("message") or "", el.text or ""


def check_messages(name, path, problems):
    raw = open(path, encoding="utf-8").read()
    for entity in ("&gt;", "&lt;", "&apos;", "&quot;"):
        if entity in raw:
            problems.append(f"{name}: {entity} in the file: a viewer shows it as it is")
    red_with_suspect = 0
    for suite, case, tag, message, body in cases(path):
        where = f"{name}: {case}"
        if len(message) > MESSAGE_CHARS:
            problems.append(f"{where}: message of {len(message)} characters")
        if " [...]" in message:
            problems.append(f"{where}: message cut with [...]: {message}")
        head = suspect_head(body)
        verdict = message
        if head:
            if not message.endswith(head):
                problems.append(f"{where}: the suspect {head!r} is not whole in the message {message!r}")
            verdict = message[: -len(head)].removesuffix("; ") if message.endswith(head) else message
            if tag == "failure":
                red_with_suspect += 1
        elif name == "red.xml" and tag == "failure" and case.startswith("probe::"):
            problems.append(f"{where}: a red probe case without a suspect: {message!r}")
        if verdict.endswith("…"):
            kept = verdict[:-1]
            first = body.splitlines()[0] if body else ""
            if not first.startswith(kept):
                problems.append(f"{where}: the message {message!r} is not its body's first line")
            elif not re.match(r"[\s,;:(—]", first[len(kept):len(kept) + 1]):
                problems.append(f"{where}: message cut inside a word: {message!r}")
    return red_with_suspect


def check_times(name, path, problems):
    for suite in ET.parse(path).getroot().iter("testsuite"):
        declared = float(suite.get("time") or 0)
        own = sum(float(c.get("time") or 0) for c in suite.iter("testcase"))
        if own > 2 * declared + 0.1:
            problems.append(
                f"{name}: suite {suite.get('name')!r}: its case times add up to {own:.3f} s, "
                f"its time is {declared:.3f} s"
            )


def check_junit2html(name, path, out):
    from junit2htmlreport import parser, runner

    report = parser.Junit(path)
    failed = sum(len(s.failed()) for s in report.suites)
    runner.run([path, os.path.join(out, f"junit2html-{name}.html")])
    return failed


def check_xunit_viewer(name, path, out, node_modules, problems):
    html = os.path.join(out, f"xunit-viewer-{name}.html")
    bin_ = os.path.join(node_modules, ".bin", "xunit-viewer")
    r = subprocess.run([bin_, "-r", path, "-o", html], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not os.path.getsize(html):
        problems.append(f"{name}: xunit-viewer failed: {r.stdout}{r.stderr}")


def github_summary(name, path, out, node_modules, problems):
    """The GitHub job summary of `path`: (its size in bytes, the CTRF failed count)."""
    ctrf = os.path.join(out, f"{name}.ctrf.json")
    md = os.path.join(out, f"{name}.summary.md")
    open(md, "w").close()
    bin_ = lambda n: os.path.join(node_modules, ".bin", n)
    r = subprocess.run([bin_("junit-to-ctrf"), path, "-o", ctrf], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        problems.append(f"{name}: junit-to-ctrf failed: {r.stdout}{r.stderr}")
        return 0, None
    env = dict(
        os.environ,
        GITHUB_STEP_SUMMARY=md,
        GITHUB_REPOSITORY="accprobe/accprobe",
        GITHUB_RUN_ID="1",
        GITHUB_SERVER_URL="https://github.com",
    )
    r = subprocess.run([bin_("github-actions-ctrf"), "all", ctrf], capture_output=True, text=True, env=env, timeout=300)
    size = os.path.getsize(md)
    if size == 0:
        problems.append(f"{name}: github-actions-ctrf wrote no summary: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    if size > SUMMARY_LIMIT:
        problems.append(f"{name}: the GitHub job summary is {size} bytes, over the 1 MiB limit")
    failed = json.load(open(ctrf))["results"]["summary"]["failed"]
    return size, failed


def check_run(name, path, problems):
    all_cases = list(cases(path))
    failures = [c for c in all_cases if c[2] in ("failure", "error")]
    if name == "busy.xml":
        names = [c[1] for c in failures]
        if names != ["gpu::busy"]:
            problems.append(f"busy.xml: the failures are {names}, not one gpu::busy")
        elif not re.search(r"PID \d+ \(\S+\)", failures[0][3]):
            problems.append(f"busy.xml: gpu::busy names no PID and process: {failures[0][3]!r}")
        if not any(c[2] == "skipped" and c[3] == "not judged: see gpu::busy" for c in all_cases):
            problems.append("busy.xml: no case skipped as not judged: see gpu::busy")
    if name == "no-device.xml":
        names = [c[1] for c in failures]
        if names != ["gpu::required"]:
            problems.append(f"no-device.xml: the failures are {names}, not one gpu::required")
        for c in failures:
            if "DriverError(" in c[3] or c[3].count(" but ") > 1:
                problems.append(f"no-device.xml: not plain words: {c[3]!r}")
    if name == "interrupted.xml":
        m = [c[3] for c in failures if c[1] == "run::interrupted"]
        if not m:
            problems.append("interrupted.xml: no run::interrupted")
        else:
            got = re.search(r"(\d+) cases finished, (\d+) did not", m[0])
            before_plan = "before its cases were planned: no case ran" in m[0]
            if not (got or before_plan) or "not green" not in m[0]:
                problems.append(f"interrupted.xml: run::interrupted says {m[0]!r}")
            elif got and got[2] == "0" and "(" in m[0]:
                problems.append(f"interrupted.xml: a parenthesis with nothing unfinished: {m[0]!r}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    junit_dir, out, node_modules = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    problems = []
    for name in FILES:
        path = os.path.join(junit_dir, name)
        red = check_messages(name, path, problems)
        check_times(name, path, problems)
        check_run(name, path, problems)
        if name == "red.xml" and red == 0:
            problems.append("red.xml: no red case names its first suspect")
        if node_modules == "-":
            print(f"viewers: {name}: {red} red cases with their suspect in the message")
            continue
        failed = check_junit2html(name, path, out)
        check_xunit_viewer(name, path, out, node_modules, problems)
        size, ctrf_failed = github_summary(name, path, out, node_modules, problems)
        if name == "busy.xml" and (failed != 1 or ctrf_failed != 1):
            problems.append(f"busy.xml: a busy GPU counts as {failed} failures in junit2html, {ctrf_failed} in CTRF")
        print(
            f"viewers: {name}: junit2html {failed} failed, xunit-viewer rendered, GitHub summary "
            f"{size} bytes ({ctrf_failed} failed), {red} red cases with their suspect in the message"
        )
    for p in problems:
        print(f"viewers: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    rendered = "" if node_modules == "-" else ", every summary within 1 MiB"
    print(f"viewers: every message whole, suspects shown, a busy GPU one failure{rendered}")


if __name__ == "__main__":
    main()
