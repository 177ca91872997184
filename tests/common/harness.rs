//! What the harness test files share (`tests/harness/`): a sandbox folder of committed
//! profiles, the recorded devices and fakes that stand in for GPUs, the JUnit readers, and
//! the child processes: each test binary that starts them has a test `child` that calls
//! `child_main`, and `child_command` re-executes the running binary with `--exact child`.
//! A stub libcuda is built here with `cc` where one exists.

use accprobe::error::GpuError;
use accprobe::harness::{self, Paths, RunOptions};
use accprobe::verdict::cases::cases;
use libtest_mimic::Arguments;
use quick_junit::{Report, TestCaseStatus};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The reason a run without a driver gives.
pub fn no_gpu() -> String {
    GpuError::NoDriver.to_string()
}

pub struct Sandbox {
    pub dir: PathBuf,
}

impl Sandbox {
    /// A folder with copies of the given committed profiles (and what they reference).
    pub fn new(tag: &str, profiles: &[&str]) -> Sandbox {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir =
            std::env::temp_dir().join(format!("accprobe-harness-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("expectations/baselines")).unwrap();
        std::fs::create_dir_all(dir.join("expectations/policies")).unwrap();
        std::fs::copy(
            root.join("expectations/policies/study.yaml"),
            dir.join("expectations/policies/study.yaml"),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("expectations/recorded")).unwrap();
        for p in profiles {
            std::fs::copy(
                root.join(format!("expectations/{p}.yaml")),
                dir.join(format!("expectations/{p}.yaml")),
            )
            .unwrap();
        }
        std::fs::copy(
            root.join("expectations/baselines/h200.yaml"),
            dir.join("expectations/baselines/h200.yaml"),
        )
        .unwrap();
        for f in std::fs::read_dir(root.join("expectations/recorded")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(
                &f,
                dir.join("expectations/recorded")
                    .join(f.file_name().unwrap()),
            )
            .unwrap();
        }
        for f in std::fs::read_dir(root.join("expectations/baselines")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(
                &f,
                dir.join("expectations/baselines")
                    .join(f.file_name().unwrap()),
            )
            .unwrap();
        }
        Sandbox { dir }
    }

    pub fn paths(&self) -> Paths {
        paths_in(&self.dir)
    }

    /// libtest arguments; libtest-mimic's own report, and with it the suite's tables and
    /// closing summary, go to a log file in the sandbox (`out/libtest.log`), not to this
    /// test binary's output.
    pub fn args(&self, extra: &[&str]) -> Arguments {
        std::fs::create_dir_all(self.dir.join("out")).unwrap();
        let log = self.dir.join("out/libtest.log").display().to_string();
        Arguments::from_iter(
            ["probe", "--logfile", &log]
                .into_iter()
                .chain(extra.iter().copied()),
        )
    }

    pub fn run(&self, args: &[&str]) -> (ExitCode, Option<Report>) {
        let args = self.args(args);
        let code = harness::run(
            &args,
            &self.paths(),
            Err(GpuError::NoDriver),
            &RunOptions::default(),
        );
        let junit = std::fs::read_to_string(self.paths().junit).ok();
        (
            code,
            junit.map(|x| Report::deserialize_from_str(&x).expect("well-formed JUnit")),
        )
    }
}

/// Where a run in sandbox folder `dir` reads and writes.
pub fn paths_in(dir: &Path) -> Paths {
    Paths {
        expectations: dir.join("expectations"),
        junit: dir.join("out/junit.xml"),
        results: dir.join("out/results.json"),
        cache: Some(dir.join("out/cache")),
        runs: dir.join("out/runs"),
        history: accprobe::config::HistoryStore::Sqlite(dir.join("out/history.sqlite")),
        history_spool: dir.join("out/history-spool"),
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// (cases, failures, skipped) that replaying a committed profile on its recorded results
/// should give, from the verdict layer itself.
pub fn replay_expectation(profile: &str) -> (usize, usize, usize) {
    use accprobe::verdict::{evaluate, Outcome};
    let p = accprobe::catalog::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("expectations/{profile}.yaml")),
    )
    .unwrap();
    let r = p.recorded.clone().unwrap();
    let outcomes: Vec<Outcome> = cases(&p).iter().map(|c| evaluate(c, &p, &r)).collect();
    let skipped = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Skipped(_) | Outcome::KnownDeviation { .. }))
        .count();
    (
        outcomes.len(),
        outcomes.iter().filter(|o| o.is_fail()).count(),
        skipped,
    )
}

pub fn counts(r: &Report, suite: &str) -> (usize, usize, usize) {
    let s = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == suite)
        .unwrap_or_else(|| {
            panic!(
                "no suite {suite}: {:?}",
                r.test_suites
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
            )
        });
    (
        s.tests,
        s.failures,
        s.test_cases
            .iter()
            .filter(|c| matches!(c.status, TestCaseStatus::Skipped { .. }))
            .count(),
    )
}

pub fn recorded_h200(ordinal: usize) -> std::sync::Arc<dyn accprobe::measure::target::Target> {
    let r = accprobe::model::results::RunResults::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("expectations/recorded/h200-2026-12-04-contexts-wave.json"),
    )
    .unwrap();
    std::sync::Arc::new(accprobe::measure::target::RecordedTarget::new(ordinal, r).unwrap())
}

impl Sandbox {
    pub fn run_on(
        &self,
        targets: Vec<std::sync::Arc<dyn accprobe::measure::target::Target>>,
        args: &[&str],
    ) -> (ExitCode, Report) {
        let args = self.args(args);
        let code = harness::run(&args, &self.paths(), Ok(targets), &RunOptions::default());
        let xml = std::fs::read_to_string(self.paths().junit).unwrap();
        (code, Report::deserialize_from_str(&xml).unwrap())
    }
}

/// The real entry point with stdout `out` (`closed`, `full` or anything else: as given);
/// (code, stderr).
pub fn main_into(sb: &Sandbox, args: &[&str], out: &str) -> (Option<i32>, String) {
    let o = child_command("main", &sb.dir, args)
        .env(CHILD_STDOUT, out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The names of the cases of `r` that failed or errored, in file order.
pub fn failing_cases(r: &Report) -> Vec<&str> {
    r.test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .filter(|c| matches!(c.status, TestCaseStatus::NonSuccess { .. }))
        .map(|c| c.name.as_str())
        .collect()
}

pub fn case_status<'a>(r: &'a Report, name: &str) -> &'a TestCaseStatus {
    &r.test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .status
}

pub fn message(st: &TestCaseStatus) -> String {
    match st {
        TestCaseStatus::NonSuccess { message, .. } | TestCaseStatus::Skipped { message, .. } => {
            message.as_ref().map(|m| m.to_string()).unwrap_or_default()
        }
        TestCaseStatus::Success { .. } => String::new(),
    }
}

pub const CHILD_MODE: &str = "ACCPROBE_TEST_CHILD";
pub const CHILD_ARGS: &str = "ACCPROBE_TEST_CHILD_ARGS";
pub const CHILD_DIR: &str = "ACCPROBE_TEST_CHILD_DIR";
/// `closed` or `full`: the child's stdout becomes a pipe nobody reads or `/dev/full` once
/// its own libtest has started it (which must print first).
pub const CHILD_STDOUT: &str = "ACCPROBE_TEST_CHILD_STDOUT";

/// The entry point of the child processes the tests below start: `main` runs the suite's
/// real entry point (`tests/probe.rs`'s), `held` the same and then, once it has written
/// `out/finished`, waits 60 s before it ends as `main` does (a signal then comes after
/// every case finished, before the end), `blocking` a run whose GPU never answers,
/// `nextest` a run on a recorded device that counts its measurements, `recorded` a run on
/// the results in `out/recorded.json` as another process published them. Each ends as the
/// suite's `main` does, through `interrupt::exit`.
pub fn child_main() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    let args = Arguments::from_iter(
        std::iter::once("probe".to_string()).chain(
            std::env::var(CHILD_ARGS)
                .unwrap_or_default()
                .split('\u{1f}')
                .filter(|a| !a.is_empty())
                .map(String::from),
        ),
    );
    let dir = std::env::var_os(CHILD_DIR).map(PathBuf::from);
    let stdout = match std::env::var(CHILD_STDOUT).as_deref() {
        Ok("closed") => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            Some(std::os::fd::OwnedFd::from(writer))
        }
        Ok("full") => Some(std::fs::File::create("/dev/full").unwrap().into()),
        _ => None,
    };
    if let Some(fd) = stdout {
        use std::os::fd::AsRawFd;
        // SAFETY: replaces fd 1 with a descriptor this process owns.
        assert_eq!(unsafe { libc::dup2(fd.as_raw_fd(), 1) }, 1);
    }
    let code = match mode.as_str() {
        "main" => harness::main_with(args),
        "held" => {
            let code = harness::main_with(args);
            std::fs::write(dir.unwrap().join("out/finished"), code.to_string()).unwrap();
            std::thread::sleep(std::time::Duration::from_secs(60));
            code
        }
        "blocking" | "slow" => {
            let dir = dir.unwrap();
            harness::install_interrupt_handler();
            // "slow": the GPU answers after 2 s; "blocking": never.
            let hold = (mode == "slow").then(|| std::time::Duration::from_secs(2));
            let target = std::sync::Arc::new(
                FakeTarget::h200().blocking(dir.join("out/measuring-started"), hold),
            );
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::default(),
            )
        }
        "nextest" => {
            let dir = dir.unwrap();
            let target = std::sync::Arc::new(FakeTarget::h200().counting_in(dir.join("out")));
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::from_env().unwrap(),
            )
        }
        "recorded" => {
            // The results in `out/recorded.json`, as another process published them for
            // device 0 (their contention record too).
            let dir = dir.unwrap();
            let r =
                accprobe::model::results::RunResults::load(&dir.join("out/recorded.json")).unwrap();
            let e = r.environment.clone().unwrap();
            let identity = accprobe::model::gpu::GpuIdentity {
                name: e.gpu_name.clone(),
                compute_capability: e.compute_capability.clone(),
            };
            let unavailable = r.sass_unavailable.clone();
            let target = std::sync::Arc::new(accprobe::measure::target::RecordedTarget::published(
                0,
                identity,
                e,
                Some(r),
                vec![],
                unavailable,
            ));
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::default(),
            )
        }
        "keyed" => {
            let dir = dir.unwrap();
            let target = std::sync::Arc::new(FakeTarget::h200().keyed());
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::default(),
            )
        }
        other => panic!("unknown child mode {other}"),
    };
    accprobe::interrupt::exit(code);
}

/// A child process of this test binary in `mode`, with libtest arguments `args`, and an
/// environment free of the caller's ACCPROBE_ and NEXTEST_ variables.
pub fn child_command(mode: &str, dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("ACCPROBE_") || k.starts_with("NEXTEST_") {
            cmd.env_remove(k.as_ref());
        }
    }
    let paths = paths_in(dir);
    cmd.env(CHILD_MODE, mode)
        .env(CHILD_ARGS, args.join("\u{1f}"))
        .env(CHILD_DIR, dir)
        .env("ACCPROBE_EXPECTATIONS", &paths.expectations)
        .env("ACCPROBE_JUNIT", &paths.junit)
        .env("ACCPROBE_RESULTS", &paths.results)
        .env("CARGO_TARGET_DIR", dir.join("out/target"))
        .env("ACCPROBE_CACHE", "off")
        // Never the host's lock directory: a stub driver registers its device there.
        .env("ACCPROBE_LOCK_DIR", dir.join("out/locks"));
    cmd
}

pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

pub fn run_child(cmd: &mut std::process::Command) -> Output {
    let out = cmd.output().expect("the test binary starts");
    Output {
        code: out.status.code(),
        // libtest's own line for the child test shares a line with the child's first.
        stdout: String::from_utf8_lossy(&out.stdout).replacen("test child ... ", "\n", 1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether a real libcuda loads here (then "no driver" cannot be shown).
pub fn driver_present() -> bool {
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// libcuda.so and libnvrtc.so stubs, built with `cc` into `dir`; `None` (and a message)
/// when there is no C compiler. The stub's `STUB_CUDA` variable picks its failure.
pub fn stub_driver(dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("stub-lib");
    std::fs::create_dir_all(&lib).unwrap();
    let c = lib.join("cuda.c");
    // Only the symbols the detection path resolves (cudarc loads each at first call), and
    // only valid CUresult values: 0 success, 2 out of memory, 100 no device. The device is
    // of compute capability 9.0 (attribute 75 the major, 76 the minor).
    std::fs::write(
        &c,
        r#"#include <stdlib.h>
#include <string.h>
static int is(const char *m) { const char *v = getenv("STUB_CUDA"); return v && strcmp(v, m) == 0; }
int cuInit(unsigned int flags) { (void)flags; return is("init_fails") ? 100 : 0; }
int cuDeviceGetCount(int *n) { *n = is("no_devices") ? 0 : 1; return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetPCIBusId(char *b, int len, int dev) { (void)dev; if (len < 13) return 1; strcpy(b, "0000:ab:00.0"); return 0; }
int cuDeviceGetUuid_v2(unsigned char *u, int dev) { (void)dev; memset(u, 0xab, 16); return 0; }
int cuDeviceGetName(char *name, int len, int dev) { (void)dev; if (len < 9) return 1; strcpy(name, "Stub GPU"); return 0; }
int cuDeviceGetAttribute(int *v, int attribute, int dev) { (void)dev; *v = attribute == 76 ? 0 : 9; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)ctx; (void)dev; return 2; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = "stub error"; return 0; }
int cuGetErrorName(int e, const char **s) { (void)e; *s = "STUB"; return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
"#,
    )
    .unwrap();
    let nvrtc = lib.join("nvrtc.c");
    std::fs::write(&nvrtc, "int accprobe_stub_nvrtc;\n").unwrap();
    for (src, out) in [(&c, "libcuda.so"), (&nvrtc, "libnvrtc.so")] {
        let status = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(lib.join(out))
            .arg(src)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("cc failed on {}: {s}", src.display()),
            Err(e) => {
                eprintln!("skipped: no C compiler to build the stub libcuda ({e})");
                return None;
            }
        }
    }
    Some(lib)
}

pub fn with_stub(cmd: &mut std::process::Command, lib: &Path, mode: &str) {
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(p) => format!("{}:{}", lib.display(), p.to_string_lossy()),
        None => lib.display().to_string(),
    };
    cmd.env("LD_LIBRARY_PATH", path).env("STUB_CUDA", mode);
}

/// The recorded H200 (`recorded_h200(0)`) with what a test needs of a real device, each
/// off by default: `count_in` counts its measurements in `dir/measurements` and notes in
/// `dir/overlap` when two processes measured at once; `block` writes `started` when
/// measuring starts and then never answers (`hold: None`) or answers after `hold`;
/// `keyed` gives it a device key, as a real device has, so that its session takes the
/// cross-process lock.
pub struct FakeTarget {
    inner: std::sync::Arc<dyn accprobe::measure::target::Target>,
    count_in: Option<PathBuf>,
    block: Option<(PathBuf, Option<std::time::Duration>)>,
    keyed: bool,
}

impl FakeTarget {
    pub fn h200() -> FakeTarget {
        FakeTarget {
            inner: recorded_h200(0),
            count_in: None,
            block: None,
            keyed: false,
        }
    }

    pub fn counting_in(mut self, dir: PathBuf) -> FakeTarget {
        self.count_in = Some(dir);
        self
    }

    pub fn blocking(mut self, started: PathBuf, hold: Option<std::time::Duration>) -> FakeTarget {
        self.block = Some((started, hold));
        self
    }

    pub fn keyed(mut self) -> FakeTarget {
        self.keyed = true;
        self
    }

    fn count(&self, dir: &Path, variants: usize) {
        use std::io::Write;
        let busy = dir.join("measuring");
        if std::fs::File::create_new(&busy).is_err() {
            std::fs::write(dir.join("overlap"), "two processes measured at once").unwrap();
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("measurements"))
            .and_then(|mut f| writeln!(f, "{} {}", std::process::id(), variants))
            .unwrap();
        // Long enough for the other processes to be waiting on the lock by now.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = std::fs::remove_file(&busy);
    }
}

impl accprobe::measure::target::Target for FakeTarget {
    fn ordinal(&self) -> usize {
        self.inner.ordinal()
    }
    fn identity(&self) -> &accprobe::model::gpu::GpuIdentity {
        self.inner.identity()
    }
    fn prepare(&self, all: &[accprobe::model::variant::Variant]) -> Result<(), GpuError> {
        self.inner.prepare(all)
    }
    fn measure(
        &self,
        variants: &[accprobe::model::variant::Variant],
        settings: &accprobe::model::settings::ProbeSettings,
        all: &[accprobe::model::variant::Variant],
    ) -> Result<Vec<Result<accprobe::model::results::VariantResult, GpuError>>, GpuError> {
        if let Some(dir) = &self.count_in {
            self.count(dir, variants.len());
        }
        if let Some((started, hold)) = &self.block {
            std::fs::write(started, "").unwrap();
            match hold {
                Some(d) => std::thread::sleep(*d),
                None => loop {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                },
            }
        }
        self.inner.measure(variants, settings, all)
    }
    fn environment(&self, clock: Option<f64>) -> accprobe::model::gpu::Environment {
        self.inner.environment(clock)
    }
    fn sass_unavailable(&self) -> Option<String> {
        self.inner.sass_unavailable()
    }
    fn contention(&self) -> Option<accprobe::model::results::Contention> {
        self.inner.contention()
    }
    fn predates(&self, v: accprobe::model::variant::Variant) -> bool {
        self.inner.predates(v)
    }
    fn device_key(&self) -> Option<accprobe::ownership::lock::DeviceKey> {
        if !self.keyed {
            return self.inner.device_key();
        }
        Some(accprobe::ownership::lock::DeviceKey {
            ordinal: 0,
            pci_bus_id: Some("0000:19:00.0".into()),
            uuid: None,
        })
    }
}

/// How `child` ended, waiting until `deadline` at most (a generous bound, never a timing
/// assertion); past it the child is killed and the test fails with `what`.
pub fn ended_within(
    child: &mut std::process::Child,
    deadline: std::time::Instant,
    what: &str,
) -> std::process::ExitStatus {
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
