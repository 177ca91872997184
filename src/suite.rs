//! The generated test suite (`tests/probe.rs`): turns profiles into libtest-mimic trials,
//! measures lazily on the GPU, and writes the table, the results file and the JUnit file.
//!
//! Contract:
//! - `--list`, name filters, `--exact`, `--skip`, `--ignored`, `--include-ignored` and
//!   `--test-threads` are libtest's, through libtest-mimic. `--list` measures nothing.
//! - Each variant is measured at most once per process, and only when a case that runs
//!   needs it. The GPU is used by one case at a time.
//! - Without a GPU every GPU case is ignored with the reason; replay cases still run.
//! - A profile that fails to load becomes a failing case naming file, line and column; the
//!   other profiles' cases still run.
//! - The JUnit file is written atomically after the run, also when a case panicked.

use crate::compile;
use crate::device;
use crate::error::Error;
use crate::measure::Mode;
use crate::profile::{self, Case, Profile};
use crate::report::{self, CaseRecord, Status, SuiteInfo};
use crate::results::{RunResults, VariantResult, SCHEMA};
use crate::target::{CudaTarget, Target};
use crate::variant::Variant;
use crate::verdict::{self, Outcome};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Where the suite reads and writes, from the environment.
#[derive(Debug, Clone)]
pub struct Paths {
    pub expectations: PathBuf,
    pub junit: PathBuf,
    pub results: PathBuf,
    /// The compile cache folder; `None` when `ACCPROBE_CACHE=off`.
    pub cache: Option<PathBuf>,
}

impl Paths {
    /// `ACCPROBE_EXPECTATIONS`, `ACCPROBE_JUNIT` and `ACCPROBE_RESULTS` override; otherwise
    /// the source tree's `expectations/` and `target/accprobe/` when the source tree is
    /// there (a cargo run), else the same paths under the working directory (a binary
    /// copied to a GPU runner).
    pub fn from_env() -> Paths {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = if manifest.join("expectations").is_dir() {
            manifest.to_path_buf()
        } else {
            PathBuf::from(".")
        };
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let target = var("CARGO_TARGET_DIR")
            .unwrap_or_else(|| root.join("target"))
            .join("accprobe");
        Paths {
            expectations: var("ACCPROBE_EXPECTATIONS").unwrap_or_else(|| root.join("expectations")),
            junit: var("ACCPROBE_JUNIT").unwrap_or_else(|| target.join("junit.xml")),
            results: var("ACCPROBE_RESULTS").unwrap_or_else(|| target.join("results.json")),
            cache: match var("ACCPROBE_CACHE") {
                Some(p) if p.as_os_str() == "off" => None,
                Some(p) => Some(p),
                None => Some(target.join("cache")),
            },
        }
    }
}

/// Collects how each case ended, for the JUnit file.
#[derive(Default)]
struct Recorder {
    cases: Mutex<Vec<CaseRecord>>,
    /// Where the JUnit file goes, and the suites known so far; `None` in unit tests.
    junit: Option<PathBuf>,
    suites: Mutex<Vec<SuiteInfo>>,
    last_write: Mutex<Option<Instant>>,
}

/// How often, at most, the JUnit file is rewritten while cases finish, so that an
/// interrupted or killed run leaves a complete file for what ran.
const JUNIT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The recorder of the run in progress, for the interrupt handler.
static CURRENT: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);

impl Recorder {
    fn new(junit: Option<PathBuf>) -> Recorder {
        Recorder {
            cases: Mutex::default(),
            junit,
            suites: Mutex::default(),
            last_write: Mutex::new(None),
        }
    }

    fn push(&self, r: CaseRecord) {
        self.cases.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        let due = {
            let mut last = self.last_write.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= JUNIT_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            let _ = self.write();
        }
    }

    fn set_suites(&self, suites: Vec<SuiteInfo>) {
        *self.suites.lock().unwrap_or_else(|e| e.into_inner()) = suites;
    }

    /// Writes the JUnit file for what has finished so far, atomically.
    fn write(&self) -> std::io::Result<()> {
        let Some(path) = &self.junit else {
            return Ok(());
        };
        let suites = self
            .suites
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let cases = self.cases.lock().unwrap_or_else(|e| e.into_inner()).clone();
        report::write_atomic(path, &report::junit(&suites, &cases))
    }
}

/// On SIGINT or SIGTERM: write the JUnit file for what ran, then exit 130.
fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        if let Some(r) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = r.write();
            eprintln!("accprobe: interrupted; the JUnit file holds the cases that finished");
        }
        std::process::exit(130);
    });
}

/// Why a GPU case could not reach a verdict.
enum NotMeasured {
    /// No usable GPU: the case is ignored with this reason.
    NoGpu(String),
    /// The GPU is there but compiling or measuring failed: the case fails.
    Broken(String),
}

/// The GPU side of one run on one device: a target (or the reason there is none), the
/// profile chosen for it, and each variant measured at first use.
pub struct GpuSession {
    pub profile: Profile,
    pub selection_note: String,
    target: Result<Arc<dyn Target>, String>,
    measured: Mutex<BTreeMap<Variant, Result<VariantResult, String>>>,
    /// The variants the cases that will run need (after libtest's filters).
    planned: Mutex<Vec<Variant>>,
    /// Seconds spent measuring so far.
    gpu_seconds: Mutex<f64>,
    /// Set when a CUDA error left the device unusable: why.
    unusable: OnceLock<String>,
    /// Whether case names carry the device (more than one device in the run).
    prefix: bool,
}

impl GpuSession {
    /// A session for `profile` on `target` (or the reason there is none). Nothing happens
    /// on the GPU until results are asked for.
    pub fn new(
        profile: Profile,
        selection_note: String,
        target: Result<Arc<dyn Target>, String>,
    ) -> GpuSession {
        GpuSession {
            profile,
            selection_note,
            target,
            measured: Mutex::new(BTreeMap::new()),
            planned: Mutex::new(Vec::new()),
            gpu_seconds: Mutex::new(0.0),
            unusable: OnceLock::new(),
            prefix: false,
        }
    }

    /// Measures every variant of the profile (in its mode) and returns the whole run, with
    /// environment and timings.
    pub fn measure_all(&self) -> Result<RunResults, String> {
        let all = self.profile.probe.variants();
        *self.planned.lock().unwrap_or_else(|e| e.into_inner()) = all.clone();
        match self.results_for(&all) {
            Ok(_) => self
                .measured_results()
                .ok_or_else(|| "nothing was measured".to_string()),
            Err(NotMeasured::NoGpu(r)) => Err(format!("no GPU: {r}")),
            Err(NotMeasured::Broken(e)) => Err(e),
        }
    }

    fn device_label(&self) -> String {
        match &self.target {
            Ok(t) => format!("gpu{} {}", t.ordinal(), t.identity().name),
            Err(_) => "no gpu".to_string(),
        }
    }

    /// The case name on this device: `gpuN::` in front when the run has several devices.
    fn case_name(&self, name: &str) -> String {
        match (&self.target, self.prefix) {
            (Ok(t), true) => format!("gpu{}::{name}", t.ordinal()),
            _ => name.to_string(),
        }
    }

    /// Results for `needs`, measuring what has not been measured yet. Holds this device's
    /// lock for the whole time, so its GPU work is one case at a time; other devices run
    /// in parallel.
    fn results_for(&self, needs: &[Variant]) -> Result<RunResults, NotMeasured> {
        let target = self
            .target
            .as_ref()
            .map_err(|r| NotMeasured::NoGpu(r.clone()))?;
        let mut measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cause) = self.unusable.get() {
            return Err(NotMeasured::Broken(format!(
                "not measured: the GPU context is unusable since {cause}"
            )));
        }
        let all = self.profile.probe.variants();
        target.prepare(&all).map_err(NotMeasured::Broken)?;
        let measuring = Instant::now();
        let missing: Vec<Variant> = needs
            .iter()
            .copied()
            .filter(|v| !measured.contains_key(v))
            .collect();
        if !missing.is_empty() {
            // In wave mode, one wave for everything this run will need (the planned set),
            // so that later cases find their variants measured.
            let mut batch = missing;
            if self.profile.probe.mode == Mode::Wave {
                let planned = self
                    .planned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                batch.extend(planned.into_iter().filter(|v| !measured.contains_key(v)));
                batch.sort();
                batch.dedup();
            }
            match target.measure(&batch, &self.profile.probe, &all) {
                Ok(rs) => {
                    for (v, r) in batch.iter().zip(rs) {
                        measured.insert(*v, r);
                    }
                }
                Err(e) => return Err(NotMeasured::Broken(e)),
            }
        }
        let mut variants = Vec::new();
        let mut broken = Vec::new();
        for &v in needs {
            match &measured[&v] {
                Ok(r) => variants.push(r.clone()),
                Err(e) => broken.push(format!("{v}: {e}")),
            }
        }
        *self.gpu_seconds.lock().unwrap_or_else(|e| e.into_inner()) +=
            measuring.elapsed().as_secs_f64();
        if !broken.is_empty() {
            // A sticky error (an illegal address, say) leaves the context unusable: the
            // cases after this one then fail with this cause instead of running.
            if let Err(e) = target.healthy() {
                let _ = self.unusable.set(format!("{}: {e}", broken.join("; ")));
            }
            return Err(NotMeasured::Broken(broken.join("; ")));
        }
        Ok(RunResults {
            schema: SCHEMA,
            mode: self.profile.probe.mode,
            profile: self.profile.name.clone(),
            source: "measured".into(),
            environment: Some(target.environment(None)),
            variants,
            sass_unavailable: target.compiled().and_then(sass_unavailable),
            timings: self.timings(),
        })
    }

    fn timings(&self) -> Option<crate::results::Timings> {
        let c = self.target.as_ref().ok()?.compile_info()?;
        Some(crate::results::Timings {
            compile_s: c.seconds,
            nvrtc_s: c.nvrtc_seconds,
            sass_s: c.sass_seconds,
            compile_cache: c.cache,
            gpu_s: *self.gpu_seconds.lock().unwrap_or_else(|e| e.into_inner()),
        })
    }

    /// Everything measured so far, with the environment, or `None` when nothing was.
    pub fn measured_results(&self) -> Option<RunResults> {
        let target = self.target.as_ref().ok()?;
        let measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        let variants: Vec<VariantResult> = self
            .profile
            .probe
            .variants()
            .iter()
            .filter_map(|v| measured.get(v).and_then(|r| r.as_ref().ok()).cloned())
            .collect();
        if variants.is_empty() {
            return None;
        }
        let mut clocks: Vec<f64> = variants.iter().filter_map(|r| r.sm_clock_mhz).collect();
        clocks.sort_by(f64::total_cmp);
        Some(RunResults {
            schema: SCHEMA,
            mode: self.profile.probe.mode,
            profile: self.profile.name.clone(),
            source: "measured".into(),
            environment: Some(target.environment(clocks.get(clocks.len() / 2).copied())),
            variants,
            sass_unavailable: target.compiled().and_then(sass_unavailable),
            timings: self.timings(),
        })
    }

    /// The compiled matrix (CUBIN and ptxas log), when it was compiled.
    pub fn compiled(&self) -> Option<&compile::Compiled> {
        self.target.as_ref().ok()?.compiled()
    }
}

fn sass_unavailable(c: &compile::Compiled) -> Option<String> {
    match &c.sass {
        compile::Sass::Unavailable(reason) => Some(reason.clone()),
        _ => None,
    }
}

/// Turns a verdict into libtest's terms, keeping the message for JUnit.
fn completion(outcome: Outcome) -> (Status, String) {
    match outcome {
        Outcome::Pass(d) => (Status::Passed, d),
        Outcome::Fail(m) => (Status::Failed, m),
        Outcome::Skipped(reason) => (Status::Ignored, reason),
        Outcome::KnownDeviation { reason, detail } => (
            Status::Ignored,
            format!("known deviation: {reason} (measured now: {detail})"),
        ),
    }
}

/// A trial whose body returns (status, message); panics become failures, and every end is
/// recorded for JUnit.
fn trial(
    recorder: &Arc<Recorder>,
    suite: String,
    name: String,
    body: impl FnOnce() -> (Status, String) + Send + 'static,
) -> Trial {
    let recorder = recorder.clone();
    Trial::ignorable_test(name.clone(), move || {
        let start = Instant::now();
        let (status, message) = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
            let text = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic payload".into());
            (Status::Failed, format!("panicked: {text}"))
        });
        recorder.push(CaseRecord {
            suite,
            name,
            status: status.clone(),
            message: message.clone(),
            duration: start.elapsed(),
        });
        match status {
            Status::Passed => Ok(Completion::Completed),
            Status::Ignored => Ok(Completion::ignored_with(message)),
            Status::Failed => Err(Failed::from(message)),
        }
    })
}

/// Replay cases: a profile's cases evaluated on its recorded results.
fn replay_trials(recorder: &Arc<Recorder>, profile: &Profile, results: &RunResults) -> Vec<Trial> {
    let suite = replay_suite_name(profile);
    let results = Arc::new(results.clone());
    let profile = Arc::new(profile.clone());
    profile
        .cases()
        .into_iter()
        .map(|case| {
            let (p, r) = (profile.clone(), results.clone());
            trial(
                recorder,
                suite.clone(),
                format!("replay::{}::{}", profile.name, case.name),
                move || completion(verdict::evaluate(&case, &p, &r)),
            )
        })
        .collect()
}

fn replay_suite_name(profile: &Profile) -> String {
    format!("replay {}", profile.name)
}

fn gpu_trials(recorder: &Arc<Recorder>, session: &Arc<GpuSession>) -> Vec<Trial> {
    let suite = gpu_suite_name(session);
    session
        .profile
        .cases()
        .into_iter()
        .map(|case: Case| {
            let s = session.clone();
            trial(
                recorder,
                suite.clone(),
                session.case_name(&case.name),
                move || match s.results_for(&case.needs) {
                    Err(NotMeasured::NoGpu(reason)) => (Status::Ignored, reason),
                    Err(NotMeasured::Broken(e)) => (Status::Failed, e),
                    Ok(results) => completion(verdict::evaluate(&case, &s.profile, &results)),
                },
            )
        })
        .collect()
}

fn gpu_suite_name(s: &GpuSession) -> String {
    format!("{} / profile {}", s.device_label(), s.profile.name)
}

fn environment_properties(r: &RunResults) -> Vec<(String, String)> {
    let Some(e) = &r.environment else {
        return Vec::new();
    };
    let opt = |x: Option<f64>| x.map_or("unknown".to_string(), |v| format!("{v:.0}"));
    vec![
        ("gpu_name".into(), e.gpu_name.clone()),
        ("compute_capability".into(), e.compute_capability.clone()),
        ("sm_count".into(), e.sm_count.to_string()),
        ("driver_version".into(), e.driver_version.clone()),
        ("cuda_driver_api".into(), e.cuda_driver_api.clone()),
        ("nvrtc_version".into(), e.nvrtc_version.clone()),
        ("sm_clock_rated_mhz".into(), opt(e.sm_clock_rated_mhz)),
        ("sm_clock_measured_mhz".into(), opt(e.sm_clock_measured_mhz)),
        ("date".into(), e.date.clone()),
        ("compile_options".into(), e.compile_options.join(" ")),
    ]
}

/// The entry point of `tests/probe.rs`.
/// When the process started, for the timing lines on stderr.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Prints how long the process has run, at a named point (stderr; not with --list).
fn mark(args: &Arguments, what: &str) {
    if !args.list {
        if let Some(t) = STARTED.get() {
            eprintln!("accprobe: {what} at {:.3} s", t.elapsed().as_secs_f64());
        }
    }
}

pub fn main() -> ExitCode {
    let _ = STARTED.set(Instant::now());
    let args = Arguments::from_args();
    device::prepare_process_environment();
    install_interrupt_handler();
    let options = match RunOptions::from_env() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let paths = Paths::from_env();
    let start = Instant::now();
    let targets: Result<Vec<Arc<dyn Target>>, String> = device::detect_all().map(|devices| {
        devices
            .into_iter()
            .map(|d| Arc::new(CudaTarget::new(d, paths.cache.clone())) as Arc<dyn Target>)
            .collect()
    });
    if !args.list {
        if let Ok(t) = &targets {
            eprintln!(
                "accprobe: CUDA and NVRTC ready in {:.3} s ({} device(s))",
                start.elapsed().as_secs_f64(),
                t.len()
            );
        }
    }
    let code = run(&args, &paths, targets, &options);
    mark(&args, "devices released");
    code
}

/// The JUnit suite of a finished session; prints its table and writes its results, ptxas
/// log and CUBIN (with `-gpuN` in the file names when the run has several devices).
fn finish_session(s: &GpuSession, paths: &Paths, several: bool) -> SuiteInfo {
    let mut info = SuiteInfo {
        name: gpu_suite_name(s),
        properties: vec![
            ("profile".into(), s.profile.name.clone()),
            ("profile_file".into(), s.profile.file.display().to_string()),
            ("profile_selection".into(), s.selection_note.clone()),
        ],
        system_out: String::new(),
    };
    let results_path = match (&s.target, several) {
        (Ok(t), true) => {
            let stem = paths
                .results
                .file_stem()
                .map_or("results".into(), |x| x.to_string_lossy().into_owned());
            paths
                .results
                .with_file_name(format!("{stem}-gpu{}.json", t.ordinal()))
        }
        _ => paths.results.clone(),
    };
    if let Err(reason) = &s.target {
        info.properties
            .push(("no_gpu_reason".into(), reason.clone()));
    }
    if let Some(r) = s.measured_results() {
        info.properties.extend(environment_properties(&r));
        let table = report::table(&r, &s.profile.probe.chains, &s.profile.probe.accumulators);
        println!("\n{}: {}\n{table}", s.device_label(), s.selection_note);
        info.system_out = format!("{}\n{table}", s.selection_note);
        match report::write_atomic(&results_path, &r.to_json()) {
            Ok(()) => println!("results: {}", results_path.display()),
            Err(e) => eprintln!("{}", Error::io(&results_path, "write results", e)),
        }
    }
    if let Some(c) = s.compiled() {
        let log_path = results_path.with_extension("ptxas.log");
        if let Err(e) = report::write_atomic(&log_path, &c.log) {
            eprintln!("{}", Error::io(&log_path, "write the ptxas log", e));
        }
        let cubin_path = results_path.with_extension("cubin");
        if let Err(e) = std::fs::write(&cubin_path, &c.cubin) {
            eprintln!("{}", Error::io(&cubin_path, "write the CUBIN", e));
        }
    }
    info
}

/// What the environment may change about a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `ACCPROBE_PROFILE`: a profile name or path.
    pub profile: Option<String>,
    /// `ACCPROBE_MODE`: `serial` or `wave`, over the profile's choice.
    pub mode: Option<Mode>,
}

impl RunOptions {
    pub fn from_env() -> Result<RunOptions, String> {
        let mode = match std::env::var("ACCPROBE_MODE").ok().as_deref() {
            None | Some("") => None,
            Some("serial") => Some(Mode::Serial),
            Some("wave") => Some(Mode::Wave),
            Some(other) => return Err(format!("ACCPROBE_MODE={other:?}: expected serial or wave")),
        };
        Ok(RunOptions {
            profile: std::env::var(profile::PROFILE_ENV).ok(),
            mode,
        })
    }
}

/// Runs the suite with `args` (libtest's flags) on `device` (or the reason there is none),
/// with what `options` override.
pub fn run(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, String>,
    options: &RunOptions,
) -> ExitCode {
    let forced = options.profile.as_deref();
    let recorder = Arc::new(Recorder::new((!args.list).then(|| paths.junit.clone())));
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorder.clone());
    let mut trials = Vec::new();
    let mut suites = Vec::new();

    let (profiles, load_errors) = profile::load_dir(&paths.expectations);
    if !load_errors.is_empty() {
        suites.push(SuiteInfo {
            name: "expectations".into(),
            ..Default::default()
        });
    }
    for e in load_errors {
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
        trials.push(trial(&recorder, "expectations".into(), name, move || {
            (Status::Failed, message)
        }));
    }
    for p in &profiles {
        if let Some(r) = &p.recorded {
            let suite = replay_suite_name(p);
            let mut system_out = report::table(r, &p.probe.chains, &p.probe.accumulators);
            system_out.insert_str(
                0,
                &format!("replay of {} ({})\n", p.file.display(), r.source),
            );
            suites.push(SuiteInfo {
                name: suite,
                properties: environment_properties(r),
                system_out,
            });
            trials.extend(replay_trials(&recorder, p, r));
        }
    }

    // One session per device (one "no GPU" session when there is none), each with the
    // profile chosen for its GPU.
    let targets: Vec<Result<Arc<dyn Target>, String>> = match targets {
        Ok(t) if !t.is_empty() => t.into_iter().map(Ok).collect(),
        Ok(_) => vec![Err("no CUDA device found".to_string())],
        Err(reason) => vec![Err(reason)],
    };
    let several = targets.len() > 1;
    let mut sessions: Vec<Arc<GpuSession>> = Vec::new();
    for target in targets {
        let identity = target.as_ref().ok().map(|t| t.identity().clone());
        match profile::select(&profiles, identity.as_ref(), forced) {
            Ok(mut sel) => {
                if let Some(m) = options.mode {
                    sel.profile.probe.mode = m;
                }
                let mut session = GpuSession::new(sel.profile, sel.why, target);
                session.prefix = several;
                sessions.push(Arc::new(session));
            }
            Err(e) => {
                let message = e.to_string();
                let name = match &target {
                    Ok(t) if several => format!("gpu{}::profile::select", t.ordinal()),
                    _ => "profile::select".to_string(),
                };
                if !suites
                    .iter()
                    .any(|s: &SuiteInfo| s.name == "profile selection")
                {
                    suites.push(SuiteInfo {
                        name: "profile selection".into(),
                        ..Default::default()
                    });
                }
                trials.push(trial(
                    &recorder,
                    "profile selection".into(),
                    name,
                    move || (Status::Failed, message),
                ));
            }
        }
    }
    for s in &sessions {
        let gpu = gpu_trials(&recorder, s);
        let mut planned: Vec<Variant> = s
            .profile
            .cases()
            .iter()
            .zip(&gpu)
            .filter(|(_, t)| !args.is_filtered_out(t))
            .flat_map(|(c, _)| c.needs.iter().copied())
            .collect();
        planned.sort();
        planned.dedup();
        *s.planned.lock().unwrap_or_else(|e| e.into_inner()) = planned;
        trials.extend(gpu);
        if !args.list {
            eprintln!("accprobe: {}: {}", s.device_label(), s.selection_note);
            if let Err(reason) = &s.target {
                eprintln!("accprobe: GPU cases are ignored: {reason}");
            }
        }
    }
    if args.list {
        let _ = libtest_mimic::run(args, trials);
        return ExitCode::SUCCESS;
    }

    let mut known = suites.clone();
    for s in &sessions {
        known.push(SuiteInfo {
            name: gpu_suite_name(s),
            ..Default::default()
        });
    }
    recorder.set_suites(known);
    // One thread per device measures what its cases will need, so that devices work in
    // parallel whatever order libtest runs the cases in; the cases wait on their device's
    // lock and find their variants measured.
    let measuring: Vec<_> = sessions
        .iter()
        .filter(|s| s.target.is_ok())
        .map(|s| {
            let s = s.clone();
            std::thread::spawn(move || {
                let planned = s.planned.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if !planned.is_empty() {
                    let _ = s.results_for(&planned);
                }
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(args, trials);
    for m in measuring {
        let _ = m.join();
    }
    mark(args, "cases finished");

    for s in &sessions {
        suites.push(finish_session(s, paths, several));
    }
    recorder.set_suites(suites);
    let written = recorder.write();
    mark(args, "results and JUnit written");
    match written {
        Ok(()) => println!("junit: {}", paths.junit.display()),
        Err(e) => {
            eprintln!("{}", Error::io(&paths.junit, "write the JUnit report", e));
            return ExitCode::FAILURE;
        }
    }
    conclusion.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_case_is_recorded_as_failed_and_the_next_case_still_runs() {
        let recorder = Arc::new(Recorder::new(None));
        let trials = vec![
            trial(&recorder, "s".into(), "boom".into(), || {
                panic!("kernel exploded")
            }),
            trial(&recorder, "s".into(), "after".into(), || {
                (Status::Passed, "fine".into())
            }),
        ];
        let log = std::env::temp_dir().join(format!("accprobe-panic-{}.log", std::process::id()));
        let args = Arguments::from_iter([
            "t",
            "--test-threads",
            "1",
            "--logfile",
            log.to_str().unwrap(),
        ]);
        let conclusion = libtest_mimic::run(&args, trials);
        let _ = std::fs::remove_file(log);
        assert_eq!((conclusion.num_failed, conclusion.num_passed), (1, 1));
        let cases = recorder.cases.lock().unwrap();
        assert_eq!(cases[0].status, Status::Failed);
        assert_eq!(cases[0].message, "panicked: kernel exploded");
        assert_eq!(cases[1].status, Status::Passed);
        let xml = report::junit(
            &[SuiteInfo {
                name: "s".into(),
                ..Default::default()
            }],
            &cases,
        );
        assert!(xml.contains("panicked: kernel exploded"), "{xml}");
    }
}

#[cfg(test)]
mod junit_while_running {
    use super::*;

    fn cases_in(path: &Path) -> usize {
        let xml = std::fs::read_to_string(path).unwrap();
        let report =
            quick_junit::Report::deserialize_from_str(&xml).expect("well-formed at every moment");
        report.test_suites.iter().map(|s| s.test_cases.len()).sum()
    }

    #[test]
    fn the_junit_file_is_complete_for_what_finished_while_the_run_goes_on() {
        let dir = std::env::temp_dir().join(format!("accprobe-junit-live-{}", std::process::id()));
        let path = dir.join("junit.xml");
        let r = Recorder::new(Some(path.clone()));
        r.set_suites(vec![SuiteInfo {
            name: "s".into(),
            ..Default::default()
        }]);
        let case = |i: usize| CaseRecord {
            suite: "s".into(),
            name: format!("c{i}"),
            status: Status::Passed,
            message: String::new(),
            duration: std::time::Duration::ZERO,
        };
        r.push(case(0));
        // The first finished case is on disk at once: a run killed now leaves a valid file.
        assert_eq!(cases_in(&path), 1);
        for i in 1..50 {
            r.push(case(i));
        }
        let seen = cases_in(&path);
        assert!((1..=50).contains(&seen), "{seen}");
        std::thread::sleep(JUNIT_EVERY + std::time::Duration::from_millis(50));
        r.push(case(50));
        assert_eq!(cases_in(&path), 51, "at most JUNIT_EVERY behind");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
