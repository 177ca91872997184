//! The compile-only cases in the suite: for every profile with a `compile_only:` section,
//! one trial per generated case, on every machine (no GPU). Each toolchain compiles once,
//! in its own worker process, when the first of its cases runs (or in the background at
//! the start of a run, so that toolchains compile in parallel).

use super::recorder::{Recorder, Skip};
use super::trial::{trial, Ending, Planned};
use crate::compile::toolchain;
use crate::compile_only::{cache_under, required_by_env, CompileOnlySession};
use crate::expectations::profile::Profile;
use crate::report::junit::{self, SuiteInfo};
use crate::verdict::compile_only;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The suite name of a profile's compile-only cases.
pub fn suite_name(profile: &Profile) -> String {
    format!("compile-only {}", profile.name)
}

/// The trial name of a case: the profile after `compile::`.
pub fn trial_name(profile: &Profile, case: &str) -> String {
    match case.strip_prefix("compile::") {
        Some(rest) => format!("compile::{}::{rest}", profile.name),
        None => case.to_string(),
    }
}

/// A session per profile with a compile_only section, and its trials.
pub fn trials(
    recorder: &Arc<Recorder>,
    profiles: &[Profile],
    cache: Option<&Path>,
) -> (Vec<Arc<CompileOnlySession>>, Vec<Planned>) {
    let mut sessions = Vec::new();
    let mut trials = Vec::new();
    for p in profiles {
        let Some(s) = CompileOnlySession::new(
            p.clone(),
            toolchain::default_root(),
            cache_under(cache),
            required_by_env(),
        ) else {
            continue;
        };
        let s = Arc::new(s);
        let suite = suite_name(p);
        // Decided before anything runs, like a missing GPU: nextest then shows these
        // cases skipped instead of running them to a "pass" that compiled nothing.
        let unavailable: BTreeMap<String, Option<String>> = s
            .toolchains()
            .into_iter()
            .map(|tc| {
                let why = s.unavailable(&tc);
                (tc, why)
            })
            .collect();
        for case in compile_only::cases(p) {
            let s2 = s.clone();
            let why = unavailable.get(&case.toolchain).cloned().flatten();
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
                    junit::status(compile_only::evaluate(&case, &s2.profile, &outcome)).into()
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

/// The suite before anything ran (the JUnit file is complete at all times).
pub fn suite_info_placeholder(s: &CompileOnlySession) -> SuiteInfo {
    SuiteInfo {
        name: suite_name(&s.profile),
        properties: vec![("profile".to_string(), s.profile.name.clone())],
        system_out: String::new(),
    }
}

/// The JUnit suite of a session: which toolchain compiled what, in how long (for the
/// toolchains that ran).
pub fn suite_info(s: &CompileOnlySession) -> SuiteInfo {
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
