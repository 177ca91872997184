//! The plan of a run: every trial (a failing case per profile that does not load, replay
//! cases, compile-only cases, a session per device with the profile chosen for its GPU and
//! its cases, `gpu::required` when a GPU runner cannot test its GPU), the JUnit suites,
//! and the variants each session's selected cases need.

use super::env::{Paths, RunOptions, REQUIRE_GPU_ENV};
use super::recorder::{self, Recorder, Skip};
use super::startup::Loaded;
use super::trial::{trial, Ending, Planned};
use super::{compile_only, gpu, REQUIRED_CASE, REQUIRED_SUITE};
use crate::catalog;
use crate::compile_only::CompileOnlySession;
use crate::error::{Error, GpuError};
use crate::expectations::profile::Profile;
use crate::measure::session::GpuSession;
use crate::measure::target::Target;
use crate::model::results::RunResults;
use crate::model::variant::Variant;
use crate::policy_gate::Asked;
use crate::report::{self, junit::CaseRecord, junit::Ended, junit::Status, junit::SuiteInfo};
use crate::text::Shown;
use crate::verdict::{self, cases::cases, cases::on_device, cases::unrecorded};
use libtest_mimic::Arguments;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What a run will do.
pub(crate) struct Plan {
    /// Every trial, in the order libtest lists them.
    pub(crate) trials: Vec<Planned>,
    /// The JUnit suites known before anything runs.
    pub(crate) suites: Vec<SuiteInfo>,
    /// One per device (one "no GPU" session when there is none).
    pub(crate) sessions: Vec<Arc<GpuSession>>,
    /// One per profile with a `compile_only:` section.
    pub(crate) compiling: Vec<Arc<CompileOnlySession>>,
    /// Whether a compile-only case is selected (then every toolchain compiles at once).
    pub(crate) compile_wanted: bool,
    /// Why a run under `ACCPROBE_REQUIRE_GPU` cannot test the GPU.
    pub(crate) required: Option<String>,
    /// Whether the run has several devices (case and file names then carry the device).
    pub(crate) several: bool,
}

/// The plan of a run on `targets` (or the reason there are none), with the profiles of
/// `loaded` (loaded here when `None`). Says each device's profile on stderr (not with
/// `--list`).
pub(crate) fn plan(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    options: &RunOptions,
    recorder: &Arc<Recorder>,
    loaded: Option<Loaded>,
) -> Plan {
    let (profiles, load_errors) = loaded.unwrap_or_else(|| catalog::load_dir(&paths.expectations));
    crate::trace::mark(format!("{} profile(s) loaded", profiles.len()));
    let mut plan = Plan {
        trials: Vec::new(),
        suites: Vec::new(),
        sessions: Vec::new(),
        compiling: Vec::new(),
        compile_wanted: false,
        required: None,
        several: false,
    };
    plan.add_load_failures(recorder, load_errors);
    plan.add_replays(recorder, &profiles);
    plan.add_compile_only(args, recorder, &profiles, paths);
    plan.add_sessions(recorder, &profiles, targets, options);
    if options.require_gpu {
        plan.add_required(recorder);
    }
    plan.add_gpu_cases(args, recorder, options);
    plan
}

impl Plan {
    /// A failing case for each profile that does not load, naming file, line and column.
    fn add_load_failures(&mut self, recorder: &Arc<Recorder>, errors: Vec<Error>) {
        if !errors.is_empty() {
            self.suites.push(SuiteInfo {
                name: "expectations".into(),
                ..Default::default()
            });
        }
        for e in errors {
            let name = match &e.file {
                Some(f) => format!(
                    "expectations::{}",
                    f.file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default()
                ),
                None => "expectations::load".to_string(),
            };
            let message = e.to_string();
            self.trials.push(Planned::runs(
                trial(recorder, "expectations".into(), name, move || {
                    Ended::new(Status::Failed, message, "invalid-profile")
                }),
                "expectations",
            ));
        }
    }

    /// The replay cases of every profile with recorded results, and their suites.
    fn add_replays(&mut self, recorder: &Arc<Recorder>, profiles: &[Profile]) {
        for p in profiles {
            let Some(r) = &p.recorded else { continue };
            let mut system_out = report::table(r, &p.probe.chains, &p.probe.accumulators);
            system_out.insert_str(
                0,
                &format!("replay of {} ({})\n", p.file.shown(), r.source.shown()),
            );
            self.suites.push(SuiteInfo {
                name: replay_suite_name(p),
                properties: r
                    .environment
                    .as_ref()
                    .map(|e| e.properties())
                    .unwrap_or_default(),
                system_out,
            });
            self.trials.extend(replay_trials(recorder, p, r));
        }
    }

    fn add_compile_only(
        &mut self,
        args: &Arguments,
        recorder: &Arc<Recorder>,
        profiles: &[Profile],
        paths: &Paths,
    ) {
        let (compiling, trials) = compile_only::trials(recorder, profiles, paths.cache.as_deref());
        self.compile_wanted = trials.iter().any(|t| !args.is_filtered_out(&t.trial));
        for s in &compiling {
            self.suites.push(compile_only::suite_info_placeholder(s));
        }
        self.compiling = compiling;
        self.trials.extend(trials);
    }

    /// One session per device (one "no GPU" session when there is none), each with the
    /// profile chosen for its GPU; a failing `profile::select` where none fits.
    fn add_sessions(
        &mut self,
        recorder: &Arc<Recorder>,
        profiles: &[Profile],
        targets: Result<Vec<Arc<dyn Target>>, GpuError>,
        options: &RunOptions,
    ) {
        let targets: Vec<Result<Arc<dyn Target>, GpuError>> = match targets {
            Ok(t) if !t.is_empty() => t.into_iter().map(Ok).collect(),
            Ok(_) => vec![Err(GpuError::NoDevice)],
            Err(reason) => vec![Err(reason)],
        };
        self.several = targets.len() > 1;
        for target in targets {
            let identity = target.as_ref().ok().map(|t| t.identity().clone());
            match catalog::select(profiles, identity.as_ref(), options.profile.as_deref()) {
                Ok(sel) => {
                    let hint = sel.unmatched.as_ref().map(crate::catalog::onboarding_hint);
                    let session = GpuSession::new(sel.profile, sel.why, target)
                        .in_mode(options.mode)
                        .naming_the_device(self.several)
                        .onboarding(hint);
                    self.sessions.push(Arc::new(session));
                }
                Err(e) => {
                    let message = e.to_string();
                    let ordinal = target.as_ref().ok().filter(|_| self.several);
                    let name = on_device("profile::select", ordinal.map(|t| t.ordinal()));
                    if !self.suites.iter().any(|s| s.name == "profile selection") {
                        self.suites.push(SuiteInfo {
                            name: "profile selection".into(),
                            ..Default::default()
                        });
                    }
                    self.trials.push(Planned::runs(
                        trial(recorder, "profile selection".into(), name, move || {
                            Ended::new(Status::Failed, message, "no-profile")
                        }),
                        "profile selection",
                    ));
                }
            }
        }
    }

    /// A GPU runner that cannot test its GPU fails, with one case that says why.
    fn add_required(&mut self, recorder: &Arc<Recorder>) {
        self.required = gpu::required_reason(&self.sessions);
        let Some(reason) = &self.required else { return };
        self.suites.insert(
            0,
            SuiteInfo {
                name: REQUIRED_SUITE.into(),
                properties: vec![(REQUIRE_GPU_ENV.into(), "set".into())],
                ..Default::default()
            },
        );
        let message = format!(
            "the GPU cannot be tested: {reason}; {REQUIRE_GPU_ENV} is set, so a runner that \
             cannot test its GPU fails, and its GPU cases are skipped as not run"
        );
        self.trials.insert(
            0,
            Planned::runs(
                trial(
                    recorder,
                    REQUIRED_SUITE.into(),
                    REQUIRED_CASE.into(),
                    move || Ended::new(Status::Failed, message, "no-gpu-required"),
                ),
                REQUIRED_SUITE,
            ),
        );
    }

    /// Each session's cases, and the variants those libtest selects need; says each
    /// device's profile on stderr.
    fn add_gpu_cases(&mut self, args: &Arguments, recorder: &Arc<Recorder>, options: &RunOptions) {
        for s in &self.sessions {
            let trials = gpu::trials(recorder, s, options.require_gpu);
            let mut planned: Vec<Variant> = cases(&s.profile)
                .iter()
                .zip(&trials)
                .filter(|(_, t)| !args.is_filtered_out(&t.trial) && !args.is_ignored(&t.trial))
                .flat_map(|(c, _)| c.needs.iter().copied())
                .collect();
            planned.sort();
            planned.dedup();
            s.plan(planned);
            self.trials.extend(trials);
            if !args.list {
                say_selection(s, self.required.is_some());
            }
        }
    }

    /// Records the plan in one step (for the interrupt report): what will run, and what
    /// is ignored at list time (into the JUnit file with its reason, as libtest counts
    /// it); then writes the JUnit file.
    pub(crate) fn record(&self, args: &Arguments, recorder: &Recorder) {
        let mut known = self.suites.clone();
        for s in &self.sessions {
            known.push(SuiteInfo {
                name: gpu::suite_name(s),
                ..Default::default()
            });
        }
        let mut expected = Vec::new();
        let mut ignored = Vec::new();
        for p in &self.trials {
            if args.is_filtered_out(&p.trial) {
                continue;
            }
            match (&p.ignored, args.is_ignored(&p.trial)) {
                (Some((reason, skip)), true) => ignored.push(recorder::Record {
                    case: CaseRecord {
                        suite: p.suite.clone(),
                        name: p.trial.name().to_string(),
                        status: Status::Ignored,
                        message: reason.clone(),
                        failure: None,
                        duration: Duration::ZERO,
                        kind: Some(skip.kind().into()),
                        started: SystemTime::now(),
                    },
                    skip: Some(skip.clone()),
                }),
                (_, true) => {}
                (_, false) => expected.push((p.suite.clone(), p.trial.name().to_string())),
            }
        }
        recorder.plan(known, ignored, expected);
        let _ = recorder.snapshot();
    }
}

/// Says on stderr which profile a session's device runs, and why its GPU cases are
/// ignored (or fail, when `required`) if it has no GPU.
fn say_selection(s: &GpuSession, required: bool) {
    match s.target() {
        Ok(_) => crate::say_err!("accprobe: {}: {}", s.device_label(), s.selection_note),
        // The note already says there is no GPU.
        Err(_) => crate::say_err!("accprobe: {}", s.selection_note),
    }
    if let Err(reason) = s.target() {
        if required {
            crate::say_err!("accprobe: no GPU, and {REQUIRE_GPU_ENV} is set: {reason}")
        } else {
            crate::say_err!("accprobe: GPU cases are ignored: {reason}")
        }
    }
}

/// Replay cases: a profile's cases evaluated on its recorded results.
fn replay_trials(
    recorder: &Arc<Recorder>,
    profile: &Profile,
    results: &RunResults,
) -> Vec<Planned> {
    let suite = replay_suite_name(profile);
    let results = Arc::new(results.clone());
    let profile = Arc::new(profile.clone());
    let asked = Arc::new(Asked::default());
    cases(&profile)
        .into_iter()
        .map(|case| {
            let (p, r, asked) = (profile.clone(), results.clone(), asked.clone());
            let why = unrecorded(&case, &results);
            let t = trial(
                recorder,
                suite.clone(),
                format!("replay::{}::{}", profile.name, case.name),
                move || {
                    let picks = asked.for_case(&case, &p, &r);
                    Ending::of_verdict(verdict::judge_with(&case, &p, &r, picks))
                },
            );
            match why {
                // A context the recorded run predates: not replayed, never passed.
                Some(reason) => Planned::ignored(t, &suite, Skip::NotJudged(reason)),
                None => Planned::runs(t, &suite),
            }
        })
        .collect()
}

fn replay_suite_name(profile: &Profile) -> String {
    format!("replay {}", profile.name)
}
