//! The compile-only gate's cases: for each (architecture, toolchain) of a profile's
//! `compile_only:` section, what the study's conclusions rest on at compile time, checked
//! on the compiled matrix without a GPU: no spills (ptxas report and SASS), each variant's
//! loop shape (N FFMAs over E partials, acc1 a strict in-place chain), its blessed SASS
//! digest, and the loops' schedule against the reference toolchain's. Known deviations
//! apply as for GPU cases.
//!
//! Case names: `compile::sm_100::nvrtc12.8::no_spills`, `compile::sm_90::nvrtc12.4::schedule`,
//! `compile::sm_100::nvrtc12.8::chain7_acc2_effective2::shape` and `...::unchanged`.
//!
//! The schedule case compares every variant's loop schedule (instructions and control
//! fields, `SassSummary::schedule_digest`) with the one blessed for the same architecture
//! under the *reference* toolchain, the last one `compile_only.toolchains` lists (the one
//! the GPU baselines are measured with). A toolchain that schedules the measured loop
//! otherwise than the reference is red even where its instructions are the same: that is
//! the change the timing would show on a GPU, which CI does not have. The reference itself
//! is held to its own blessed schedule. One case per architecture and toolchain, so that a
//! toolchain known to schedule differently is one known deviation, not one per variant.

use super::{shape, with_known_deviations, Failure, Outcome};
use crate::expectations::baselines::{CompileBaselines, COMPILE_DIGEST_CHARS};
use crate::expectations::profile::Profile;
use crate::model::compiled::{ArchOutcome, CompiledMatrix};
use crate::model::results::SassSummary;
use crate::model::variant::Variant;
use crate::text::{joined, Shown};

/// One compile-only case.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileCase {
    pub name: String,
    /// `sm_90`.
    pub architecture: String,
    /// `12.8`, as the profile names it.
    pub toolchain: String,
    pub(crate) check: CompileCheck,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CompileCheck {
    /// No variant spills: the ptxas report's spill stores and loads, and LDL/STL in the SASS.
    NoSpills,
    /// Every variant's loop schedule is the one blessed for the reference toolchain.
    Schedule,
    /// The measured loop's shape, as `sass::...::shape` checks it on a GPU run.
    Shape(Variant),
    /// The SASS digest is the blessed one for this architecture and toolchain.
    Unchanged(Variant),
}

/// `compile::<arch>::nvrtc<toolchain>::<rest>`.
pub(crate) fn case_name(arch: &str, toolchain: &str, rest: &str) -> String {
    format!("compile::{arch}::nvrtc{toolchain}::{rest}")
}

/// Every compile-only case of `profile`, in a stable order: per architecture, per
/// toolchain: no_spills, then each variant's shape, then (with baselines) each digest.
pub fn cases(profile: &Profile) -> Vec<CompileCase> {
    let Some(c) = &profile.compile_only else {
        return Vec::new();
    };
    let variants = profile.probe.variants();
    let mut out = Vec::new();
    for arch in &c.architectures {
        for tc in &c.toolchains {
            let case = |rest: String, check| CompileCase {
                name: case_name(arch, tc, &rest),
                architecture: arch.clone(),
                toolchain: tc.clone(),
                check,
            };
            out.push(case("no_spills".into(), CompileCheck::NoSpills));
            if c.baselines.is_some() {
                out.push(case("schedule".into(), CompileCheck::Schedule));
            }
            for &v in &variants {
                out.push(case(format!("{v}::shape"), CompileCheck::Shape(v)));
            }
            if c.baselines.is_some() {
                for &v in &variants {
                    out.push(case(format!("{v}::unchanged"), CompileCheck::Unchanged(v)));
                }
            }
        }
    }
    out
}

/// Judges `case` on what the toolchain made of its architecture: compiled (judged, known
/// deviations applied), unsupported by the toolchain (ignored with the reason: never a
/// pass), or failed (fails).
pub fn evaluate(case: &CompileCase, profile: &Profile, outcome: &ArchOutcome) -> Outcome {
    let mut judged = match outcome {
        ArchOutcome::Unsupported(reason) => Outcome::Skipped(reason.clone()),
        ArchOutcome::Failed(reason) => compile_failed(reason, &case.architecture).into(),
        ArchOutcome::Compiled(m) => {
            with_known_deviations(&case.name, profile, evaluate_raw(case, profile, m))
        }
    };
    if let Outcome::Fail(f) = &mut judged {
        f.place.case = case.name.clone();
    }
    judged
}

/// The failure of a case on `arch`, which the toolchain failed to compile for `reason`:
/// its first line the verdict, the lines after it (a compiler's log) the detail. A
/// compile that failed judged no measurement: no figures, no suspect.
fn compile_failed(reason: &str, arch: &str) -> Failure {
    let (verdict, log) = reason.split_once('\n').unwrap_or((reason, ""));
    let failure = Failure::new(verdict).at(arch.to_string());
    match log.trim_end() {
        "" => failure,
        log => failure.detail(log),
    }
}

/// The failure of a case whose variants `what` the toolchain `tool` did not compile for
/// `arch`.
fn compiled_none(tool: &str, what: &str, arch: &str) -> Failure {
    Failure::new(format!("{tool} compiled no {what} for {arch}")).at(arch.to_string())
}

fn sass_reason(m: &CompiledMatrix) -> String {
    format!(
        "no SASS for {} by {}: {}",
        m.architecture,
        m.toolchain.describe(),
        m.sass_unavailable
            .as_deref()
            .unwrap_or("the disassembler's output had no summary")
            .shown()
    )
}

fn evaluate_raw(case: &CompileCase, profile: &Profile, m: &CompiledMatrix) -> Outcome {
    let variants = profile.probe.variants();
    let tool = m.toolchain.describe();
    match case.check {
        CompileCheck::NoSpills => no_spills(m, &variants, &tool),
        CompileCheck::Schedule => schedule(case, profile, m, &variants),
        CompileCheck::Shape(v) => match m.variants.get(&v.name()) {
            None => compiled_none(&tool, &v.name(), &m.architecture).into(),
            Some(c) => match &c.sass {
                None => Outcome::Skipped(sass_reason(m)),
                Some(s) => match shape(v, s) {
                    Outcome::Fail(mut f) => {
                        f.verdict = format!("{} with {tool}: {}", m.architecture, f.verdict);
                        Outcome::Fail(f)
                    }
                    Outcome::Pass(p) => {
                        Outcome::Pass(format!("{} with {tool}: {p}", m.architecture))
                    }
                    other => other,
                },
            },
        },
        CompileCheck::Unchanged(v) => unchanged(case, profile, m, v, &tool),
    }
}

/// How to bless the compile-only baselines of `profile`.
fn bless_command(profile: &Profile) -> String {
    format!(
        "`cargo xtask toolchains --profile {} --bless` on a machine with the toolchains (ci/toolchains.sh)",
        profile.name
    )
}

/// The no-spills case ([`CompileCheck::NoSpills`]): no spill in the ptxas report or the
/// SASS of any base-context variant.
fn no_spills(m: &CompiledMatrix, variants: &[Variant], tool: &str) -> Outcome {
    let mut bad = Vec::new();
    let mut missing = Vec::new();
    for v in variants {
        let Some(c) = m.variants.get(&v.name()) else {
            missing.push(v.name());
            continue;
        };
        // As on the GPU: a spill outside the base context is data, not a failure.
        if !v.is_base() {
            continue;
        }
        let p = c.ptxas;
        if p.spill_store_bytes + p.spill_load_bytes > 0 {
            bad.push(format!(
                "{v}: ptxas reports {} bytes spill stores, {} bytes spill loads",
                p.spill_store_bytes, p.spill_load_bytes
            ));
        }
        if let Some(s) = c
            .sass
            .as_ref()
            .filter(|s| !s.local_memory_instructions.is_empty())
        {
            bad.push(format!(
                "{v}: local memory instructions in the SASS: {}",
                joined(&s.local_memory_instructions, ", ")
            ));
        }
    }
    if !missing.is_empty() {
        return compiled_none(tool, &missing.join(", "), &m.architecture).into();
    }
    if !bad.is_empty() {
        return Failure::new(format!(
            "spills on {} with {tool} (expected none): {}",
            m.architecture,
            bad.join("; ")
        ))
        .at(m.architecture.clone())
        .into();
    }
    let sass = match &m.sass_unavailable {
        None => "and no LDL/STL in the SASS".to_string(),
        Some(r) => format!("(SASS not read: {})", r.shown()),
    };
    Outcome::Pass(format!(
        "{}: no spills in the ptxas report {sass} of {} variants, {tool}",
        m.architecture,
        variants.len()
    ))
}

/// The unchanged case ([`CompileCheck::Unchanged`]): `v`'s SASS digest against the one
/// blessed for the architecture and toolchain.
fn unchanged(
    case: &CompileCase,
    profile: &Profile,
    m: &CompiledMatrix,
    v: Variant,
    tool: &str,
) -> Outcome {
    let Some(b) = profile
        .compile_only
        .as_ref()
        .and_then(|c| c.baselines.as_ref())
    else {
        return Outcome::Skipped(
            "the profile's compile_only section names no baselines file".into(),
        );
    };
    let Some(c) = m.variants.get(&v.name()) else {
        return compiled_none(tool, &v.name(), &m.architecture).into();
    };
    let Some(s) = &c.sass else {
        return Outcome::Skipped(sass_reason(m));
    };
    let now = &s.digest[..COMPILE_DIGEST_CHARS.min(s.digest.len())];
    let bless = bless_command(profile);
    let Some(then) = b.digest(&case.architecture, &case.toolchain, &v.name()) else {
        return Failure::new(format!(
            "no compile-only baseline for {v} on {} with NVRTC {} in {}{}: bless one with {bless}",
            case.architecture,
            case.toolchain,
            b.file.shown(),
            if b.file.exists() {
                ""
            } else {
                ", which does not exist"
            }
        ))
        .at(v.name())
        .into();
    };
    if then == now {
        return Outcome::Pass(format!("{} with {tool}: SASS digest {now}", m.architecture));
    }
    let why = why_digests_differ(b, case, m, tool);
    Failure::new(format!(
        "{v} on {} with {tool}: the SASS changed (digest {then} -> {now}){}",
        m.architecture,
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join("; "))
        },
    ))
    .at(v.name())
    .detail(format!(
        "loop body now:\n  {}",
        joined(&s.loop_body, "\n  ")
    ))
    .detail(format!(
        "If the change is expected, re-bless {} with {bless}",
        b.file.shown()
    ))
    .into()
}

/// What else differs from the baselines' origin: the disassembler, the toolchain's build.
fn why_digests_differ(
    b: &CompileBaselines,
    case: &CompileCase,
    m: &CompiledMatrix,
    tool: &str,
) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(o) = b.origin.as_ref() {
        if o.disassembler != m.disassembler {
            why.push(format!(
                "the baselines were disassembled by {}, this run by {}",
                o.disassembler, m.disassembler
            ));
        }
        if let Some(t) = o.toolchains.get(&case.toolchain).filter(|t| **t != tool) {
            why.push(format!(
                "the baselines were compiled by {t}, this run by {tool}"
            ));
        }
    }
    why
}

/// The schedule case ([`CompileCheck::Schedule`]): each variant's loop schedule digest
/// against the reference toolchain's blessed one for the architecture.
fn schedule(
    case: &CompileCase,
    profile: &Profile,
    m: &CompiledMatrix,
    variants: &[Variant],
) -> Outcome {
    let Some((b, reference)) = profile
        .compile_only
        .as_ref()
        .and_then(|c| Some((c.baselines.as_ref()?, c.toolchains.last()?)))
    else {
        return Outcome::Skipped(
            "the profile's compile_only section names no baselines file".into(),
        );
    };
    let (arch, tool) = (&m.architecture, m.toolchain.describe());
    let bless = bless_command(profile);
    let Schedules { differ, unblessed } = match schedules_against(b, reference, m, variants, &tool)
    {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    let against = format!("the blessed loop schedule of NVRTC {reference} on {arch}");
    if let Some((first, s)) = differ.first() {
        let same_text = differ
            .iter()
            .filter(|(v, s)| {
                b.digest(arch, reference, &v.name())
                    == Some(&s.digest[..COMPILE_DIGEST_CHARS.min(s.digest.len())])
            })
            .count();
        let mut names: Vec<String> = differ.iter().take(8).map(|(v, _)| v.name()).collect();
        if differ.len() > names.len() {
            names.push(format!("and {} more", differ.len() - names.len()));
        }
        let (lines, stall) = loop_now(s);
        return Failure::new(format!(
            "{arch} with {tool}: {} of {} loops are scheduled otherwise than {against} \
             (the reference: the toolchain compile_only.toolchains lists last): {}; {same_text} of \
             them have the whole function's SASS text digest of the reference too",
            differ.len(),
            variants.len(),
            names.join(", "),
        ))
        .at(arch.clone())
        .detail(format!(
            "{first}'s loop now (control fields, scoreboards renumbered by first use):\n{lines}{stall}"
        ))
        .detail(format!(
            "If the schedule is expected, re-bless {} with {bless}; if this toolchain is known to \
             schedule otherwise, record `{}` as a known deviation with the measured reason",
            b.file.shown(),
            case.name
        ))
        .into();
    }
    if !unblessed.is_empty() {
        return Outcome::Skipped(format!(
            "no schedule digest blessed for {} of {} variants on {arch} with NVRTC {reference} in {}: re-bless with {bless}",
            unblessed.len(),
            variants.len(),
            b.file.shown()
        ));
    }
    Outcome::Pass(format!(
        "{arch} with {tool}: the loop schedule of all {} variants is {against}",
        variants.len()
    ))
}

/// The variants whose loop schedule differs from the reference toolchain's blessed one,
/// and those with none blessed.
struct Schedules<'m> {
    differ: Vec<(&'m Variant, &'m SassSummary)>,
    unblessed: Vec<String>,
}

/// Each variant's loop schedule against the `reference` toolchain's blessed one; the case's
/// outcome where a variant was not compiled or its schedule not decoded.
fn schedules_against<'m>(
    b: &CompileBaselines,
    reference: &str,
    m: &'m CompiledMatrix,
    variants: &'m [Variant],
    tool: &str,
) -> Result<Schedules<'m>, Outcome> {
    let arch = &m.architecture;
    let mut differ = Vec::new();
    let mut unblessed = Vec::new();
    for v in variants {
        let Some(c) = m.variants.get(&v.name()) else {
            return Err(compiled_none(tool, &v.name(), arch).into());
        };
        let Some(s) = &c.sass else {
            return Err(Outcome::Skipped(sass_reason(m)));
        };
        let Some(now) = &s.schedule_digest else {
            return Err(Outcome::Skipped(format!(
                "{arch} with {tool}: {}",
                s.schedule_unknown
                    .as_deref()
                    .unwrap_or("the loop schedule was not decoded")
                    .shown()
            )));
        };
        let now = &now[..COMPILE_DIGEST_CHARS.min(now.len())];
        match b.schedule(arch, reference, &v.name()) {
            None => unblessed.push(v.name()),
            Some(then) if then != now => differ.push((v, s)),
            Some(_) => {}
        }
    }
    Ok(Schedules { differ, unblessed })
}

/// A loop's instructions beside their control fields, one a line, and its total stall.
fn loop_now(s: &SassSummary) -> (String, String) {
    let width = s
        .loop_body
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<String> = s
        .loop_body
        .iter()
        .zip(&s.loop_control)
        .map(|(t, c)| format!("  {t:width$}  {c}"))
        .collect();
    let stall = crate::model::results::total_stall(&s.loop_control).map_or(String::new(), |t| {
        format!("\n  total stall: {t} cycles per iteration")
    });
    (lines.join("\n"), stall)
}
