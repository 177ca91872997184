//! The compile-only cases in the suite: for every profile with a `compile_only:` section,
//! one trial per generated case, on every machine (no GPU). Each toolchain compiles once,
//! in its own worker process, when the first of its cases runs (or in the background at
//! the start of a run, so that toolchains compile in parallel).

use super::recorder::{Recorder, Skip};
use super::trial::{skip_reason, trial, Ending, Planned};
use crate::compile::toolchain::{self, ToolchainError};
use crate::compile_only::{cache_under, required_by_env, CompileOnlySession};
use crate::expectations::profile::Profile;
use crate::report::junit::{self, SuiteInfo};
use crate::verdict::compile_only;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The suite name of a profile's compile-only cases.
pub(crate) fn suite_name(profile: &Profile) -> String {
    format!("compile-only {}", profile.name)
}

/// The trial name of a case: the profile after `compile::`.
pub(crate) fn trial_name(profile: &Profile, case: &str) -> String {
    match case.strip_prefix("compile::") {
        Some(rest) => format!("compile::{}::{rest}", profile.name),
        None => case.to_string(),
    }
}

/// A session per profile with a compile_only section, and its trials. A toolchain that
/// is not installed and not required (`ACCPROBE_REQUIRE_TOOLCHAINS` unset) is one ignored
/// case, `compile::<profile>::nvrtc<version>`, instead of one per architecture and check:
/// a GPU runner that did not ask for it has nothing to read in them.
pub(crate) fn trials(
    recorder: &Arc<Recorder>,
    profiles: &[Profile],
    cache: Option<&Path>,
) -> (Vec<Arc<CompileOnlySession>>, Vec<Planned>) {
    let mut sessions = Vec::new();
    let mut trials = Vec::new();
    let root = toolchain::default_root();
    let required = required_by_env();
    for p in profiles {
        let Some(s) =
            CompileOnlySession::new(p.clone(), root.clone(), cache_under(cache), required)
        else {
            continue;
        };
        let s = Arc::new(s);
        let suite = suite_name(p);
        let cases = compile_only::cases(p);
        // Decided before anything runs, like a missing GPU: nextest then shows these
        // cases skipped instead of running them to a "pass" that compiled nothing.
        let mut unavailable: BTreeMap<String, Option<String>> = BTreeMap::new();
        for tc in s.toolchains() {
            let why = s.unavailable(&tc);
            let absent = !required
                && matches!(
                    toolchain::resolve(&tc, &root),
                    Err(ToolchainError::NotInstalled(_))
                );
            match why {
                Some(why) if absent => {
                    let n = cases.iter().filter(|c| c.toolchain == tc).count();
                    trials.push(not_installed(recorder, p, &suite, &tc, n, &why));
                }
                why => {
                    unavailable.insert(tc, why);
                }
            }
        }
        for case in cases {
            let Some(why) = unavailable.get(&case.toolchain).cloned() else {
                continue;
            };
            let s2 = s.clone();
            let skip = why.clone().map(Skip::NoToolchain);
            let t = trial(
                recorder,
                suite.clone(),
                trial_name(p, &case.name),
                move || -> Ending {
                    if let Some(why) = why {
                        return Ending::skipped(
                            why.clone(),
                            "no-toolchain",
                            Skip::NoToolchain(why),
                        );
                    }
                    let outcome = s2.outcome(&case.toolchain, &case.architecture);
                    junit::Ended::from(compile_only::evaluate(&case, &s2.profile, &outcome)).into()
                },
            );
            trials.push(match skip {
                Some(skip) => Planned::ignored(t, &suite, skip),
                None => Planned::runs(t, &suite),
            });
        }
        sessions.push(s);
    }
    (sessions, trials)
}

/// The one ignored case that stands for the `cases` compile-only cases of toolchain `tc`,
/// not installed (`why` says where it was looked for and how to install it).
fn not_installed(
    recorder: &Arc<Recorder>,
    profile: &Profile,
    suite: &str,
    tc: &str,
    cases: usize,
    why: &str,
) -> Planned {
    let skip = Skip::ToolchainNotInstalled {
        toolchain: tc.to_string(),
        cases,
        reason: format!(
            "{why}; this one case stands for the {cases} compile-only cases of profile {} \
             with that pinned NVRTC {tc} build, listed one by one once it is installed or \
             under {}; the system NVRTC (the one a GPU suite loads) does not stand in for \
             it, since these cases judge what that pinned build compiles against its own \
             baselines",
            profile.name,
            toolchain::REQUIRE_ENV
        ),
    };
    let in_body = skip.clone();
    let t = trial(
        recorder,
        suite.to_string(),
        format!("compile::{}::nvrtc{tc}", profile.name),
        move || Ending::skipped(skip_reason(&in_body), "no-toolchain", in_body),
    );
    Planned::ignored(t, suite, skip)
}

/// The suite before anything ran (the JUnit file is complete at all times).
pub(crate) fn suite_info_placeholder(s: &CompileOnlySession) -> SuiteInfo {
    SuiteInfo {
        name: suite_name(&s.profile),
        properties: vec![("profile".to_string(), s.profile.name.clone())],
        system_out: String::new(),
    }
}

/// The JUnit suite of a session: which toolchain compiled what, in how long (for the
/// toolchains that ran).
pub(crate) fn suite_info(s: &CompileOnlySession) -> SuiteInfo {
    let mut properties = vec![("profile".to_string(), s.profile.name.clone())];
    let mut out = String::new();
    for tc in s.toolchains() {
        let Some(run) = s.peek(&tc) else { continue };
        let compiled = run.outcomes.values().find_map(|o| match o {
            crate::model::compiled::ArchOutcome::Compiled(m) => Some(m),
            _ => None,
        });
        let what = compiled.map_or_else(
            || format!("NVRTC {tc}: nothing compiled"),
            |m| format!("{}, SASS by {}", m.toolchain.describe(), m.disassembler),
        );
        properties.push((format!("toolchain_{tc}"), what.clone()));
        out.push_str(&format!("{what}: {:.2} s\n", run.seconds));
    }
    SuiteInfo {
        name: suite_name(&s.profile),
        properties,
        system_out: out,
    }
}
