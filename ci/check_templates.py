#!/usr/bin/env python3
"""Checks what the CI templates promise a GPU team; run by .ci/run (PyYAML).

    python3 ci/check_templates.py

GitHub (ci/github/accprobe.yml): every job that runs on a self-hosted runner is kept from
forks' pull requests and sets ACCPROBE_REQUIRE_GPU=1; every job installs the Rust that
rust-toolchain.toml pins (`rustup toolchain install`) and no other; the host job runs fmt,
clippy and the tests; both publish JUnit; the GPU job keeps results, ptxas log, CUBIN and JUnit and the compile cache; a
cargo cache is used; every action is pinned (a release tag vX.Y.Z or a commit).

GitLab (ci/gitlab/accprobe.gitlab-ci.yml): only hidden jobs at the top level (no
`stages:`, `variables:`, `default:` that would leak into an including project); the GPU job
sets ACCPROBE_REQUIRE_GPU=1, keeps results, ptxas log, CUBIN and JUnit `when: always` and
reports JUnit; the cache is keyed on Cargo.lock and keeps the compile cache; every job
installs the pinned Rust, and an image is the pinned release's. Exits 1 listing every
broken promise.
"""
import re
import sys

import yaml

problems = []

# The release rust-toolchain.toml pins.
PINNED = re.search(r'^channel = "([^"]+)"$', open("rust-toolchain.toml", encoding="utf-8").read(), re.M)[1]
INSTALL = "rustup toolchain install"


def need(ok, what):
    if not ok:
        problems.append(what)


def github(path):
    wf = yaml.safe_load(open(path, encoding="utf-8"))
    jobs = wf["jobs"]
    fork_guard = (
        "github.event_name != 'pull_request' || "
        "github.event.pull_request.head.repo.full_name == github.repository"
    )
    for name, job in jobs.items():
        steps = job.get("steps", [])
        for s in steps:
            uses = s.get("uses")
            if uses:
                ref = uses.split("@", 1)[1] if "@" in uses else ""
                need(
                    re.fullmatch(r"v\d+\.\d+\.\d+|[0-9a-f]{40}", ref),
                    f"{path}: {name}: {uses} is not pinned to a release or a commit",
                )
        need(
            any("rust-cache" in s.get("uses", "") for s in steps),
            f"{path}: {name}: no cargo cache",
        )
        need(
            any(s.get("run", "").strip() == INSTALL for s in steps)
            and not any("rust-toolchain" in s.get("uses", "") for s in steps),
            f"{path}: {name}: does not install rust-toolchain.toml's Rust (`{INSTALL}`) alone",
        )
        if "self-hosted" in str(job.get("runs-on", "")) or "self-hosted" in str(
            job.get("strategy", "")
        ):
            need(job.get("if") == fork_guard, f"{path}: {name}: no guard against forks")
            need(
                str(job.get("env", {}).get("ACCPROBE_REQUIRE_GPU")) == "1",
                f"{path}: {name}: ACCPROBE_REQUIRE_GPU is not 1",
            )
            runs = [s.get("run", "") for s in steps]
            gate = "cargo test --release --test probe -- --skip replay:: --skip compile::"
            need(gate in runs, f"{path}: {name}: no gate (expected `{gate}`)")
            kept = " ".join(
                s.get("with", {}).get("path", "")
                for s in steps
                if "upload-artifact" in s.get("uses", "")
            )
            for want in ("results-*.json", "results-*.ptxas.log", "results-*.cubin", "junit-*.xml"):
                need(want in kept, f"{path}: {name}: {want} is not kept as an artifact")
            need(
                any(
                    "actions/cache" in s.get("uses", "")
                    and s.get("with", {}).get("path") == "target/accprobe/cache"
                    for s in steps
                ),
                f"{path}: {name}: the compile cache (target/accprobe/cache) is not kept",
            )
            need(
                any(
                    "actions/cache" in s.get("uses", "")
                    and "github.run_id" in str(s.get("with", {}).get("key", ""))
                    for s in steps
                ),
                f"{path}: {name}: the compile cache's key does not change per run, so a new toolchain's entries are never saved",
            )
        if name in ("host", "gpu"):
            need(
                any("action-junit-report" in s.get("uses", "") for s in steps),
                f"{path}: {name}: publishes no JUnit",
            )
    host_runs = [s.get("run", "") for s in jobs["host"]["steps"]]
    for cmd in (
        "cargo fmt --all -- --check",
        "cargo clippy --workspace --all-targets -- -D warnings",
        "cargo test --workspace",
    ):
        need(cmd in host_runs, f"{path}: host: does not run `{cmd}`")


def gitlab(path):
    doc = yaml.safe_load(open(path, encoding="utf-8"))
    for key in doc:
        need(
            key.startswith("."),
            f"{path}: top-level {key!r}: an included template must define hidden jobs only",
        )
    base = doc[".accprobe-base"]
    need(
        base.get("cache", {}).get("key", {}).get("files") == ["Cargo.lock"],
        f"{path}: .accprobe-base: the cache is not keyed on Cargo.lock",
    )
    need(
        "target/accprobe/cache/" in base.get("cache", {}).get("paths", []),
        f"{path}: .accprobe-base: the compile cache (target/accprobe/cache/) is not kept",
    )
    gpu = doc[".accprobe-gpu"]
    need(
        "cargo test --release --test probe -- --skip replay:: --skip compile::"
        in gpu.get("script", []),
        f"{path}: .accprobe-gpu: no gate (expected the GPU cases only)",
    )
    need(
        str(gpu.get("variables", {}).get("ACCPROBE_REQUIRE_GPU")) == "1",
        f"{path}: .accprobe-gpu: ACCPROBE_REQUIRE_GPU is not 1",
    )
    art = gpu.get("artifacts", {})
    need(art.get("when") == "always", f"{path}: .accprobe-gpu: artifacts not kept always")
    need(
        art.get("reports", {}).get("junit") == "target/accprobe/junit-*.xml",
        f"{path}: .accprobe-gpu: no JUnit report",
    )
    kept = " ".join(art.get("paths", []))
    for want in ("results-*.json", "results-*.ptxas.log", "results-*.cubin", "junit-*.xml"):
        need(want in kept, f"{path}: .accprobe-gpu: {want} is not kept as an artifact")
    for name in (".accprobe-host", ".accprobe-gpu", ".accprobe-report"):
        need(doc[name].get("extends") == ".accprobe-base", f"{path}: {name}: not .accprobe-base")
        script = doc[name].get("script", [])
        need(
            bool(script) and script[0].split("#")[0].strip() == INSTALL,
            f"{path}: {name}: does not first install rust-toolchain.toml's Rust (`{INSTALL}`)",
        )
        image = doc[name].get("image")
        need(
            image in (None, f"rust:{PINNED}"),
            f"{path}: {name}: image {image} is not rust:{PINNED}, the release rust-toolchain.toml pins",
        )


github("ci/github/accprobe.yml")
gitlab("ci/gitlab/accprobe.gitlab-ci.yml")
for p in problems:
    print(f"templates: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print("templates: the GitHub and GitLab templates keep their promises")
