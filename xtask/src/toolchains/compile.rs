//! `cargo xtask toolchains` without `--gpu`: the compile-only gate of a profile, every
//! architecture x toolchain of its `compile_only:` section compiled (no GPU) and summarised;
//! `--bless` writes its digests.

use crate::paths::{find_profile, workspace};
use crate::Failure;
use accprobe::compile::toolchain;
use accprobe::compile_only::{cache_under, prepare_compile_bless, CompileOnlySession};
use accprobe::expectations::profile::Profile;
use accprobe::model::compiled::ArchOutcome;
use accprobe::text::Shown;
use accprobe::verdict::{compile_only, Outcome};
use std::path::Path;

/// `cargo xtask toolchains --profile P [--bless] [--dry-run]`: compile-only, no GPU.
pub fn compile_only(dir: &Path, profile: &str, bless: bool, dry_run: bool) -> crate::Done {
    let p = find_profile(dir, profile)?;
    let cache = cache_under(Some(&workspace()?.join("target/accprobe/cache")));
    let root = toolchain::default_root();
    let s = CompileOnlySession::new(p.clone(), root.clone(), cache, true)
        .ok_or_else(|| format!("profile {profile:?} has no compile_only section"))?;
    let archs = p
        .compile_only
        .as_ref()
        .map(|c| c.architectures.clone())
        .unwrap_or_default();
    // A toolchain that is not installed compiles nothing: one line at the end says what
    // to install, instead of a failure per architecture and case.
    let (installed, missing): (Vec<String>, Vec<String>) =
        s.toolchains().into_iter().partition(|tc| {
            !matches!(
                toolchain::resolve(tc, &root),
                Err(toolchain::ToolchainError::NotInstalled(_))
            )
        });
    // Toolchains compile in parallel, one worker process each.
    std::thread::scope(|scope| {
        for tc in &installed {
            let s = &s;
            scope.spawn(move || {
                let _ = s.run(tc);
            });
        }
    });
    let failed = summarise(&p, &s, &archs, &installed);
    for tc in &installed {
        if let Some(r) = s.peek(tc) {
            say!("NVRTC {tc}: worker {:.2} s", r.seconds);
        }
    }
    if !missing.is_empty() {
        return Err(not_installed(&missing, &root).into());
    }
    if bless {
        return bless_digests(&s, profile, dry_run);
    }
    if failed > 0 {
        return Err(Failure::Printed);
    }
    Ok(())
}

/// What to install for the profile's toolchains that are not under `root`, said once.
fn not_installed(missing: &[String], root: &Path) -> String {
    let names = match missing {
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => String::new(),
    };
    let there: Vec<String> = toolchain::installed(root)
        .into_iter()
        .map(|(version, _)| version)
        .collect();
    format!(
        "NVRTC {names} not installed in {} (installed there: {}), so nothing of theirs was \
         compiled or judged; install the pinned set with `ci/toolchains.sh` (or a release it does \
         not pin: its full version as the argument), then run this again ({})",
        root.display(),
        if there.is_empty() {
            "none".to_string()
        } else {
            there.join(", ")
        },
        accprobe::compile_only::why_required()
    )
}

/// Says each (architecture, installed toolchain)'s outcome and its cases' counts, the
/// first few failures of each; the number of failed cases.
fn summarise(p: &Profile, s: &CompileOnlySession, archs: &[String], installed: &[String]) -> usize {
    let mut failed = 0;
    if !installed.is_empty() {
        say!("{:<8} {:<8} {:<60} cases", "arch", "NVRTC", "outcome");
    }
    for arch in archs {
        for tc in installed.iter().cloned() {
            let o = s.outcome(&tc, arch);
            let (mut pass, mut fail, mut skip) = (0, 0, 0);
            for c in compile_only::cases(p)
                .iter()
                .filter(|c| &c.architecture == arch && c.toolchain == tc)
            {
                match compile_only::evaluate(c, p, &o) {
                    Outcome::Pass(_) => pass += 1,
                    Outcome::Fail(m) => {
                        fail += 1;
                        if fail <= 3 {
                            warn!(
                                "FAIL {}: {}",
                                c.name,
                                m.verdict.lines().next().unwrap_or("")
                            );
                        }
                    }
                    _ => skip += 1,
                }
            }
            failed += fail;
            let what = outcome_line(&o);
            say!("{arch:<8} {tc:<8} {what:<60} {pass} pass, {fail} fail, {skip} ignored");
        }
    }
    failed
}

/// What the toolchain made of an architecture, on one line.
fn outcome_line(o: &ArchOutcome) -> String {
    match &o {
        ArchOutcome::Compiled(m) => format!(
            "{} variants, registers {}..{}, NVRTC {:.2} s, SASS {:.2} s, cache {}",
            m.variants.len(),
            m.variants
                .values()
                .map(|v| v.ptxas.registers)
                .min()
                .unwrap_or(0),
            m.variants
                .values()
                .map(|v| v.ptxas.registers)
                .max()
                .unwrap_or(0),
            m.nvrtc_seconds,
            m.sass_seconds,
            m.cache
        ),
        ArchOutcome::Unsupported(r) => {
            format!("ignored: {}", r.split(" (").next().unwrap_or(r))
        }
        ArchOutcome::Failed(r) => format!("FAILED: {}", r.lines().next().unwrap_or(r)),
    }
}

/// `--bless`: the compile-only digests of what `s` compiled, written unless `dry_run`.
fn bless_digests(s: &CompileOnlySession, profile: &str, dry_run: bool) -> crate::Done {
    let b = prepare_compile_bless(
        s,
        &format!("cargo xtask toolchains --profile {profile} --bless"),
    )
    .map_err(|e| e.to_string())?;
    if b.diff.is_empty() {
        say!("{}: no change", b.file.shown());
    } else {
        say!("{}:", b.file.shown());
        for l in &b.diff {
            say!("  {l}");
        }
    }
    if !dry_run {
        b.write().map_err(|e| e.to_string())?;
        say!("written: {}", b.file.shown());
    }
    Ok(())
}
