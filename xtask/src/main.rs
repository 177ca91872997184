//! `cargo xtask`: developer commands for accprobe (alias in .cargo/config.toml), one
//! module per task.
//!
//! - `probe`: run the matrix on the GPU, print the study's table, write a results file.
//! - `gate`: evaluate a results file against a profile, on any machine.
//! - `bless`: write a profile's generated baselines from a reviewed results file.
//! - `report`: Markdown and SVG charts from one or more results files.
//! - `sass`: a variant's SASS loop body from a results file.
//! - `agree`: serial against wave mode on the same GPU.
//! - `bench`: the GPU phase of each mode against its floor, compile cold and cached.
//! - `toolchains`: the compile-only gate over architectures x NVRTC toolchains (no GPU;
//!   `--bless` writes its digests), or the profile measured per toolchain (`--gpu`).

/// `println!` that never panics: when stdout is closed (`cargo xtask sass ... | head -1`)
/// the output stops quietly and the command still finishes its work (files it writes, its
/// exit code); `println!` would panic on the broken pipe. What it prints goes through
/// [`accprobe::report::text::clean`]: text from a results file or a profile (a GPU name,
/// a SASS line) never sends a terminal a control sequence.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say_line(false, format_args!($($arg)*))
    };
}

/// [`say!`] for stderr: `eprintln!` that never panics and escapes what a terminal must
/// not get raw.
macro_rules! warn {
    ($($arg:tt)*) => {
        $crate::say_line(true, format_args!($($arg)*))
    };
}

/// Writes one line to stdout (or stderr), through the terminal sanitiser; a write error
/// (a closed pipe, a full disk behind a redirection) ends the output, not the command.
pub fn say_line(to_stderr: bool, args: std::fmt::Arguments) {
    use std::io::Write;
    let text = args.to_string();
    let mut line = accprobe::report::text::clean(&text).into_owned();
    line.push('\n');
    let _ = if to_stderr {
        std::io::stderr().lock().write_all(line.as_bytes())
    } else {
        std::io::stdout().lock().write_all(line.as_bytes())
    };
}

mod bless;
mod gate;
mod gpu;
mod progress;
mod report;
mod sass;
mod toolchains;

use accprobe::catalog;
use accprobe::error::{GpuError, GpuErrorKind};
use accprobe::expectations::profile::Profile;
use accprobe::model::settings::Mode;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "accprobe developer commands: measure on the GPU, judge and bless results, report",
    long_about = "accprobe developer commands. `probe`, `agree` and `bench` need a CUDA GPU; \
                  `gate`, `bless`, `report` and `sass` work on results files anywhere."
)]
struct Cli {
    /// The folder of profiles (default: expectations/ in the workspace: the nearest folder,
    /// from the working directory up, with a `[workspace]` Cargo.toml or an expectations/).
    #[arg(long, global = true)]
    expectations: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Serial,
    Wave,
}

#[derive(Subcommand)]
enum Command {
    /// Run every variant of the profile on the GPU, print the study's table (progress per
    /// chain and accumulator count, best per chain, gain over acc1, spread) and write a
    /// results file. Without a GPU it says why and exits 2.
    Probe {
        /// CUDA device ordinal (default 0; same as ACCPROBE_DEVICE).
        #[arg(long)]
        device: Option<usize>,
        /// Profile name (default: the one that matches the GPU, else `documented`).
        #[arg(long)]
        profile: Option<String>,
        /// Serial (one variant at a time) or wave (all at once); default: the profile's.
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
        /// Where to write the results (default: target/accprobe/probe.json in the workspace).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Evaluate a results file against a profile and print every verdict; exits 1 on any
    /// failure. `--results` may be any measured file; the documented profile's recorded
    /// table is replayed by the test suite itself.
    Gate {
        /// A results file written by the GPU suite (target/accprobe/results.json), by
        /// `probe`, or committed under expectations/recorded/.
        #[arg(long)]
        results: PathBuf,
        /// Profile name (default: the profile the results were measured under).
        #[arg(long)]
        profile: Option<String>,
    },
    /// Write expectations/baselines/<profile>.yaml from a measured results file, after
    /// printing what changes. Refuses under CI, results from a GPU the profile does not
    /// match, and results that failed validity checks.
    Bless {
        /// Profile name.
        #[arg(long)]
        profile: String,
        /// The measured results file to take the baselines from.
        #[arg(long)]
        from: PathBuf,
        /// Bless even results with unwritten outputs, spills or missing reports.
        #[arg(long)]
        allow_invalid: bool,
        /// Print the diff but write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write a Markdown summary (the study's table per results file, the invariants side by
    /// side) and SVG charts (progress against K per chain length, acc2/acc1 gain against
    /// chain length, the study's numbers as reference) from one or more results files.
    Report {
        /// Results files (several GPUs or drivers).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The folder to write report.md and the charts into (default:
        /// target/accprobe/report in the workspace).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print a variant's measured SASS loop body from a results file, each FFMA marked
    /// with the partial accumulator (dependency chain) it extends.
    /// Example: `cargo xtask sass chain29 acc4`.
    Sass {
        /// Chain length: `chain29` or `29`.
        chain: String,
        /// Accumulator count: `acc4` or `4`.
        accumulators: String,
        /// The results file to read (default: target/accprobe/results.json in the workspace).
        #[arg(long)]
        results: Option<PathBuf>,
    },
    /// Measure the profile serially and as a wave on this GPU and compare each variant;
    /// wave mode is accepted when every variant's median agrees within the tolerance.
    Agree {
        /// Profile name (default: the one that matches the GPU, else `documented`).
        #[arg(long)]
        profile: Option<String>,
        /// Largest accepted relative difference of medians (0.005 = 0.5%).
        #[arg(long, default_value_t = 0.005)]
        tolerance: f64,
        /// Where to write the per-variant comparison (JSON; default:
        /// target/accprobe/agreement.json in the workspace).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Benchmark the gate: GPU phase of each mode against its floor (budget x launches /
    /// SM clock), NVRTC compile cold and cached; medians of several runs.
    Bench {
        /// The profile whose matrix is timed (default: the study's 24 variants).
        #[arg(long, default_value = "documented")]
        profile: String,
        /// How many runs (each: a cold compile and serial run, a cached compile and wave
        /// run); the medians are reported.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Where to write every run and the medians (JSON; default:
        /// target/accprobe/bench.json in the workspace).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The toolchain matrix (docs/toolchains.md). Without --gpu: compile the profile's
    /// matrix for every architecture x NVRTC of its compile_only section (one worker
    /// process per toolchain, no GPU), check it, and with --bless write its SASS digests.
    /// With --gpu: measure the profile under each --toolchain on this GPU and print each
    /// variant's progress, the SASS that changed and the cases that flip, side by side;
    /// a toolchain whose CUBIN the driver refuses is reported. --compare does the same
    /// from results files already measured.
    Toolchains {
        /// Profile name (compile-only default: h200; --gpu default: the GPU's).
        #[arg(long)]
        profile: Option<String>,
        /// Write expectations/baselines/<profile>-compile.yaml (refused under CI).
        #[arg(long, conflicts_with_all = ["gpu", "compare"])]
        bless: bool,
        /// With --bless: print the diff but write nothing.
        #[arg(long, requires = "bless")]
        dry_run: bool,
        /// Measure on the GPU under each --toolchain instead.
        #[arg(long, requires = "toolchain")]
        gpu: bool,
        /// A toolchain for --gpu: an installed version (12.8) or a folder. Repeat it.
        #[arg(long)]
        toolchain: Vec<String>,
        /// Compare these results files instead of measuring.
        #[arg(long, num_args = 1.., conflicts_with = "gpu")]
        compare: Vec<PathBuf>,
        /// Where --gpu writes each toolchain's results and toolchains.md (default:
        /// target/accprobe/toolchains in the workspace).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// How a command failed; the exit code comes from the type.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Failure {
    /// Already reported (failing verdicts were printed): exit 1.
    #[error("failed (reported above)")]
    Printed,
    /// The GPU side: exit 2 when there is no usable GPU or the device configuration is
    /// wrong, 1 when the GPU failed.
    #[error("{0}")]
    Gpu(GpuError),
    /// Anything else, with what to print: exit 1.
    #[error("{0}")]
    Message(String),
}

impl From<String> for Failure {
    fn from(m: String) -> Failure {
        Failure::Message(m)
    }
}

impl From<&str> for Failure {
    fn from(m: &str) -> Failure {
        Failure::Message(m.to_string())
    }
}

impl From<GpuError> for Failure {
    fn from(e: GpuError) -> Failure {
        Failure::Gpu(e)
    }
}

/// What a command returns.
pub type Outcome = Result<(), Failure>;

/// The workspace root: the nearest folder, from the working directory up, that holds a
/// Cargo.toml with `[workspace]` or an `expectations/` folder. `cargo xtask` runs in the
/// directory it is invoked from, so this is the checkout the user is in, never the one the
/// xtask binary was built from.
pub fn workspace() -> Result<PathBuf, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    workspace_from(&cwd)
}

/// [`workspace`] from `start`.
pub fn workspace_from(start: &Path) -> Result<PathBuf, String> {
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        let is_workspace =
            accprobe::input::read_text(&manifest, "Cargo.toml", accprobe::input::YAML_LIMIT)
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"));
        if is_workspace || dir.join("expectations").is_dir() {
            return Ok(dir.to_path_buf());
        }
    }
    Err(format!(
        "no accprobe workspace here: neither {} nor a folder above it holds a Cargo.toml with [workspace] or an expectations/ folder; run from inside the checkout, or pass --expectations and the output paths",
        start.display()
    ))
}

/// `given`, else `relative` under the workspace.
fn or_workspace(given: &Option<PathBuf>, relative: &str) -> Result<PathBuf, Failure> {
    match given {
        Some(p) => Ok(p.clone()),
        None => Ok(workspace()?.join(relative)),
    }
}

/// The profile called `name` in `dir`, or an error listing what failed to load.
pub fn find_profile(dir: &Path, name: &str) -> Result<Profile, String> {
    let (profiles, errors) = catalog::load_dir(dir);
    if let Some(p) = profiles.into_iter().find(|p| p.name == name) {
        return Ok(p);
    }
    let mut msg = format!("no profile named {name:?} in {}", dir.display());
    for e in errors {
        msg.push_str(&format!("\n  (could not load: {e})"));
    }
    Err(msg)
}

fn run(cli: &Cli) -> Outcome {
    let dir = &or_workspace(&cli.expectations, "expectations")?;
    let mode = |m: &Option<ModeArg>| {
        m.map(|m| match m {
            ModeArg::Serial => Mode::Serial,
            ModeArg::Wave => Mode::Wave,
        })
    };
    match &cli.command {
        Command::Probe {
            device,
            profile,
            mode: m,
            out,
        } => {
            if let Some(d) = device {
                std::env::set_var(accprobe::measure::device::DEVICE_ENV, d.to_string());
            }
            let out = or_workspace(out, "target/accprobe/probe.json")?;
            gpu::probe(dir, profile.as_deref(), mode(m), &out)
        }
        Command::Gate { results, profile } => gate::run(dir, results, profile.as_deref()),
        Command::Bless {
            profile,
            from,
            allow_invalid,
            dry_run,
        } => bless::run(dir, profile, from, *allow_invalid, *dry_run),
        Command::Report { files, out } => {
            let out = or_workspace(out, "target/accprobe/report")?;
            report::run(dir, files, &out).map_err(Failure::from)
        }
        Command::Sass {
            chain,
            accumulators,
            results,
        } => {
            let results = or_workspace(results, "target/accprobe/results.json")?;
            sass::run(&results, chain, accumulators).map_err(Failure::from)
        }
        Command::Agree {
            profile,
            tolerance,
            out,
        } => {
            let out = or_workspace(out, "target/accprobe/agreement.json")?;
            gpu::agree(dir, profile.as_deref(), *tolerance, &out)
        }
        Command::Bench { profile, runs, out } => {
            let out = or_workspace(out, "target/accprobe/bench.json")?;
            gpu::bench(dir, profile, *runs, &out)
        }
        Command::Toolchains {
            profile,
            bless,
            dry_run,
            gpu,
            toolchain,
            compare,
            out,
        } => {
            if *gpu {
                let out = or_workspace(out, "target/accprobe/toolchains")?;
                toolchains::gpu(dir, profile.as_deref(), toolchain, &out)
            } else if !compare.is_empty() {
                toolchains::compare_files(dir, profile.as_deref(), compare)
            } else {
                toolchains::compile_only(
                    dir,
                    profile.as_deref().unwrap_or("h200"),
                    *bless,
                    *dry_run,
                )
            }
        }
    }
}

fn main() -> ExitCode {
    if let Some(code) = accprobe::compile::toolchain::worker_main() {
        return code;
    }
    if let Err(e) = accprobe::compile::toolchain::select_for_process() {
        warn!("error: {e}");
        return ExitCode::from(2);
    }
    // Before any thread: NVRTC's own signal handler must never end (or hang) the process.
    accprobe::interrupt::install("xtask", |name| warn!("xtask: interrupted by {name}"));
    if let Err(e) = accprobe::trace::start() {
        warn!("error: {e}");
        return ExitCode::from(2);
    }
    accprobe::measure::device::prepare_process_environment();
    if let Err(e) = accprobe::config::check() {
        warn!("error: {e}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    let result = run(&cli);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Printed) => ExitCode::FAILURE,
        Err(Failure::Gpu(e)) => match e.kind() {
            GpuErrorKind::Unavailable => {
                // The error already says what is missing ("no CUDA driver: ...").
                warn!("error: {e} (this command needs a CUDA GPU)");
                ExitCode::from(2)
            }
            GpuErrorKind::Config => {
                warn!("error: {e}");
                ExitCode::from(2)
            }
            GpuErrorKind::Broken | GpuErrorKind::Busy => {
                warn!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Err(Failure::Message(e)) => {
            warn!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    //! The xtask commands on the committed results files, no GPU needed.
    use super::*;

    fn root() -> PathBuf {
        workspace().unwrap()
    }

    fn expectations() -> PathBuf {
        root().join("expectations")
    }

    /// The run the H200 baselines were blessed from (wave mode, the profile's).
    fn committed() -> PathBuf {
        root().join("expectations/recorded/h200-2026-11-30-wave.json")
    }

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accprobe-xtask-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn gate_passes_the_committed_run_and_fails_a_slower_one() {
        gate::run(&expectations(), &committed(), None).unwrap();
        let mut r = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let v = r
            .variants
            .iter_mut()
            .find(|v| v.name == "chain13_acc2_effective2")
            .unwrap();
        // 3% slower, consistently: every sample, and the summary and mean they give (a
        // results file whose summary contradicts its samples is refused before any verdict).
        for x in v.samples.iter_mut().flatten() {
            *x = *x * 97 / 100;
        }
        let fresh =
            accprobe::model::results::VariantResult::measured(v.variant(), v.samples.clone());
        v.summary = fresh.summary;
        v.mean_progress = fresh.mean_progress;
        let dir = temp("gate");
        let slower = dir.join("slower.json");
        std::fs::write(&slower, r.to_json()).unwrap();
        assert_eq!(
            gate::run(&expectations(), &slower, None),
            Err(Failure::Printed),
            "failures are printed, not returned"
        );
        let e = gate::run(&expectations(), &dir.join("missing.json"), None).unwrap_err();
        assert!(
            e.to_string().contains("missing.json") && e.to_string().contains("cannot read results"),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn report_shows_toolchains_side_by_side_when_the_inputs_come_from_several_nvrtc() {
        let dir = temp("report-toolchains");
        let a = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let mut b = a.clone();
        b.environment.as_mut().unwrap().nvrtc_version = "12.4".into();
        for v in b
            .variants
            .iter_mut()
            .filter(|v| v.chain == 7 && v.sink == accprobe::model::variant::Sink::A)
        {
            for s in v.samples.iter_mut().flatten() {
                *s = *s * 9 / 10;
            }
            let fresh =
                accprobe::model::results::VariantResult::measured(v.variant(), v.samples.clone());
            v.summary = fresh.summary;
            v.mean_progress = fresh.mean_progress;
        }
        let other = dir.join("nvrtc12.4.json");
        std::fs::create_dir_all(&dir).unwrap();
        accprobe::report::write_atomic(&other, &b.to_json()).unwrap();
        let out = dir.join("out");
        report::run(&expectations(), &[committed(), other], &out).unwrap();
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## Toolchains side by side"), "{md}");
        assert!(md.contains("### Progress per toolchain"), "{md}");
        assert!(md.contains("(-10.00%)") || md.contains("(-9.99%)"), "{md}");
        // One toolchain: no such section.
        let single = dir.join("single");
        report::run(&expectations(), &[committed()], &single).unwrap();
        let md = std::fs::read_to_string(single.join("report.md")).unwrap();
        assert!(!md.contains("Toolchains side by side"), "{md}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn report_writes_markdown_and_readable_svg_charts_from_the_committed_runs() {
        let dir = temp("report");
        let serial = root().join("expectations/recorded/h200-2026-11-30.json");
        report::run(&expectations(), &[serial, committed()], &dir).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.starts_with("<!-- Generated by `cargo xtask report`"));
        assert!(
            md.contains("| 13 | 108,695.0 | 144,926.5 | 140,844.0 | 147,058.0 | 149,252.5 |"),
            "{md}"
        );
        assert!(md.contains("## The invariants side by side"));
        assert!(
            md.contains("| `invariant::acc2_gain_grows` | holds | holds |"),
            "{md}"
        );
        let charts: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "svg"))
            .collect();
        assert_eq!(
            charts.len(),
            3,
            "a progress chart per run and the gain chart"
        );
        for c in charts {
            let svg = std::fs::read_to_string(&c).unwrap();
            assert!(
                svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
                "{}",
                c.display()
            );
            for words in ["study (docs/study.md)", "</text>"] {
                assert!(svg.contains(words), "{} lacks {words}", c.display());
            }
            // The x axis: a tick at each measured value, none elsewhere (the y labels
            // have two decimals, so the whole numbers are the x ticks).
            let ticks: Vec<String> = svg
                .split("<text")
                .skip(1)
                .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
                .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()))
                .map(str::to_string)
                .collect();
            let want: &[&str] = if c.ends_with("gain.svg") {
                &["7", "13", "29"]
            } else {
                &["1", "2", "3", "4", "5", "7", "8", "16"]
            };
            assert_eq!(ticks, want, "{}", c.display());
        }
        // The two runs agree within 0.5%, so their gain lines coincide: the first is drawn
        // wide and solid, the second narrow and dashed over it.
        let gain = std::fs::read_to_string(dir.join("gain.svg")).unwrap();
        assert!(gain.contains("stroke-width=\"6\""), "the wide solid line");
        assert!(
            gain.matches("stroke-width=\"2\"").count() > 10,
            "the dashed line over it, in many short dashes"
        );
        assert!(report::run(&expectations(), &[], &dir)
            .unwrap_err()
            .contains("at least one"));
        // The README's glob also matches agree's and bench's JSON: skipped, not fatal.
        let agreement = root().join("docs/results/h200-2026-11-29-agreement.json");
        let bench = root().join("docs/results/h200-2026-11-29-bench.json");
        report::run(
            &expectations(),
            &[committed(), agreement.clone(), bench],
            &dir,
        )
        .unwrap();
        assert!(report::run(&expectations(), &[agreement], &dir)
            .unwrap_err()
            .contains("none of"));
        // A broken results file is still an error.
        let broken = dir.join("broken.json");
        std::fs::write(&broken, "{\"schema\": 2}").unwrap();
        assert!(report::run(&expectations(), &[committed(), broken], &dir)
            .unwrap_err()
            .contains("not a results file"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn report_of_two_inputs_with_one_label_writes_a_chart_for_each() {
        let dir = temp("report-same");
        report::run(&expectations(), &[committed(), committed()], &dir).unwrap();
        let mut charts: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".svg"))
            .collect();
        charts.sort();
        assert_eq!(charts.len(), 3, "{charts:?}");
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        for c in &charts {
            assert!(
                md.contains(&format!("]({c})")),
                "report.md does not show {c}"
            );
        }
        assert!(md.contains(" \\#2\n"), "the second heading is told apart");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn report_under_a_long_folder_name_writes_short_chart_names_and_names_a_file_it_cannot_write() {
        let dir = temp("report-long");
        // Two inputs with one label: each label gets its (long) path.
        let long = dir.join("d".repeat(200)).join("e".repeat(200));
        std::fs::create_dir_all(&long).unwrap();
        let (a, b) = (long.join("a.json"), long.join("b.json"));
        std::fs::copy(committed(), &a).unwrap();
        std::fs::copy(committed(), &b).unwrap();
        let out = dir.join("out");
        report::run(&expectations(), &[a.clone(), b.clone()], &out).unwrap();
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 4, "report.md and 3 charts: {names:?}");
        assert!(names.iter().all(|n| n.len() < 80), "{names:?}");
        // A chart that cannot be written (a folder is in its place) is named.
        let blocked = dir.join("blocked");
        std::fs::create_dir_all(blocked.join("gain.svg")).unwrap();
        let e = report::run(&expectations(), &[a], &blocked).unwrap_err();
        assert!(
            e.contains(&blocked.join("gain.svg").display().to_string()),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn report_escapes_what_a_results_file_holds_in_markdown_and_svg() {
        let dir = temp("report-bytes");
        let mut r = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let e = r.environment.as_mut().unwrap();
        e.gpu_name = "H200\n# injected | col\u{1b}[2J\u{7}\u{fffe}\u{9b}".into();
        let file = dir.join("bytes.json");
        accprobe::report::write_atomic(&file, &r.to_json()).unwrap();
        let out = dir.join("out");
        report::run(&expectations(), &[file], &out).unwrap();
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            !md.lines().any(|l| l.starts_with("# injected")),
            "a newline in gpu_name injects no heading: {md}"
        );
        assert!(md.contains("H200\\\\n\\# injected \\| col"), "{md}");
        // Every table row has as many columns as its header: the `|` is escaped.
        let columns = |l: &str| l.replace("\\|", "").matches('|').count();
        let mut header = None;
        for l in md.lines() {
            match (l.starts_with('|'), header) {
                (true, None) => header = Some(columns(l)),
                (true, Some(n)) => assert_eq!(columns(l), n, "{l}"),
                (false, _) => header = None,
            }
        }
        for f in std::fs::read_dir(&out).unwrap() {
            let f = f.unwrap().path();
            let text = std::fs::read_to_string(&f).unwrap();
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{fffe}', '\u{9b}']),
                "{} holds a raw control character",
                f.display()
            );
        }
        let svg = std::fs::read_to_string(out.join("gain.svg")).unwrap();
        assert!(svg.contains("H200\\n# injected | col\\u{1b}"), "{svg}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bless_dry_run_prints_no_change_for_the_committed_run_and_writes_nothing() {
        let file = expectations().join("baselines/h200.yaml");
        let before = std::fs::read(&file).unwrap();
        bless::run(&expectations(), "h200", &committed(), false, true).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), before);
        let e = bless::run(&expectations(), "nonesuch", &committed(), false, true).unwrap_err();
        assert!(
            e.to_string().contains("no profile named \"nonesuch\""),
            "{e}"
        );
        // A profile that matches no GPU says so in words, not as a Rust struct.
        let e = bless::run(&expectations(), "documented", &committed(), false, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not match: it matches no GPU") && !e.contains("GpuMatch"),
            "{e}"
        );
    }

    #[test]
    fn bless_leaves_an_unchanged_file_alone_even_under_ci() {
        use std::os::unix::fs::MetadataExt;
        let dir = temp("bless-same");
        let copy = dir.join("expectations");
        for sub in ["baselines", "policies", "recorded"] {
            std::fs::create_dir_all(copy.join(sub)).unwrap();
        }
        for f in [
            "h200.yaml",
            "policies/study.yaml",
            "recorded/h200-2026-11-30-wave.json",
        ] {
            std::fs::copy(expectations().join(f), copy.join(f)).unwrap();
        }
        std::fs::write(copy.join("baselines/h200.yaml"), "profile: h200\nmeasured: {results: x, gpu_name: x, driver_version: x, nvrtc_version: x, date: x}\nprogress: {}\n").unwrap();
        // What bless writes for the committed run, put there beforehand.
        let p = find_profile(&copy, "h200").unwrap();
        let r = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let label = bless::label(&committed());
        let command = format!("cargo xtask bless --profile h200 --from {label}");
        let file = copy.join("baselines/h200.yaml");
        let b = accprobe::bless::prepare(&p, &r, &label, &command, &file, p.baselines.as_ref());
        std::fs::write(&file, &b.contents).unwrap();
        let before = std::fs::metadata(&file).unwrap();
        // Not a dry run: nothing to write, so it succeeds even where CI is set.
        bless::run(&copy, "h200", &committed(), false, false).unwrap();
        let after = std::fs::metadata(&file).unwrap();
        assert_eq!(
            (before.ino(), before.mtime(), before.mtime_nsec()),
            (after.ino(), after.mtime(), after.mtime_nsec()),
            "the file was rewritten"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_bless_header_names_the_results_file_without_absolute_paths() {
        assert_eq!(
            bless::label(&committed()),
            "expectations/recorded/h200-2026-11-30-wave.json",
            "relative to the workspace"
        );
        let outside = temp("bless-label").join("run.json");
        std::fs::write(&outside, "{}").unwrap();
        assert_eq!(bless::label(&outside), "run.json", "outside: the file name");
        assert_eq!(
            bless::label(Path::new("no/such/run.json")),
            "no/such/run.json",
            "relative: as given"
        );
        std::fs::remove_dir_all(outside.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_workspace_is_found_from_the_working_directory_up() {
        let ws = temp("ws");
        std::fs::write(ws.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        assert_eq!(workspace_from(&ws.join("a/b")).unwrap(), ws);
        std::fs::create_dir_all(ws.join("a/expectations")).unwrap();
        assert_eq!(
            workspace_from(&ws.join("a/b")).unwrap(),
            ws.join("a"),
            "the nearest"
        );
        let bare = temp("ws-none");
        // A temp folder normally has no workspace above it; where one has, this says so.
        if let Err(e) = workspace_from(&bare) {
            assert!(e.contains("no accprobe workspace here"), "{e}");
        }
        std::fs::remove_dir_all(ws).unwrap();
        std::fs::remove_dir_all(bare).unwrap();
    }

    #[test]
    fn sass_prints_from_the_committed_run_and_rejects_bad_names() {
        sass::run(&committed(), "chain29", "acc4").unwrap();
        sass::run(&committed(), "29", "4").unwrap();
        assert!(sass::run(&committed(), "chainX", "acc4")
            .unwrap_err()
            .contains("expected chainN"));
        assert!(sass::run(&committed(), "chain30", "acc4")
            .unwrap_err()
            .contains("is not in"));
    }

    #[test]
    fn the_usage_says_cargo_xtask_and_every_option_has_help() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let usage = cli.render_usage().to_string();
        assert!(usage.contains("Usage: cargo xtask "), "{usage}");
        cli.build();
        for sub in cli.get_subcommands() {
            let usage = sub.clone().render_usage().to_string();
            assert!(
                usage.contains(&format!("cargo xtask {}", sub.get_name())),
                "{usage}"
            );
            for arg in sub.get_arguments() {
                assert!(
                    arg.get_help().is_some(),
                    "cargo xtask {} --{}: no help text",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
    }

    #[test]
    fn toolchains_compare_shows_progress_sass_changes_flips_and_refused_toolchains() {
        use toolchains::{compare, driver_refused, Measured};
        let p = find_profile(&expectations(), "h200").unwrap();
        let a = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let mut b = a.clone();
        b.environment.as_mut().unwrap().nvrtc_version = "12.8".into();
        let v = b
            .variants
            .iter_mut()
            .find(|v| v.name == "chain13_acc2_effective2")
            .unwrap();
        v.summary.as_mut().unwrap().median *= 1.05;
        v.mean_progress *= 1.05;
        let s = v.sass.as_mut().unwrap();
        s.digest = "0".repeat(64);
        s.loop_body[0] = "NOP".into();
        let refused =
            "the driver cannot run CUBINs from NVRTC 13.5: CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
        assert!(driver_refused(refused));
        assert!(!driver_refused("cuInit failed"));
        let md = compare(
            &p,
            &[
                Measured {
                    toolchain: "13.0".into(),
                    outcome: Ok(a),
                },
                Measured {
                    toolchain: "12.8".into(),
                    outcome: Ok(b),
                },
                Measured {
                    toolchain: "13.5".into(),
                    outcome: Err(refused.into()),
                },
            ],
        );
        assert!(
            md.contains("| 13.5 | not measured: the driver cannot run CUBINs from NVRTC 13.5"),
            "{md}"
        );
        assert!(
            md.contains("| chain13_acc2_effective2 | 144926.0 | 152172.3 (+5.00%) |"),
            "{md}"
        );
        assert!(
            md.contains("- chain13_acc2_effective2, 13.0 -> 12.8:") && md.contains("+NOP"),
            "{md}"
        );
        assert!(
            md.contains("| `invariant::acc2_is_peak::chain13` | fails | holds |"),
            "{md}"
        );
        assert!(!md.contains("`invariant::acc2_gain_grows`"), "{md}");
    }

    #[test]
    fn the_cli_parses_and_refuses_bad_arguments() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        assert!(
            Cli::try_parse_from(["xtask", "bless", "--profile", "h200"]).is_err(),
            "--from is required"
        );
        assert!(Cli::try_parse_from(["xtask", "probe", "--mode", "sideways"]).is_err());
        assert!(
            Cli::try_parse_from(["xtask", "toolchains", "--gpu"]).is_err(),
            "--gpu needs --toolchain"
        );
        assert!(Cli::try_parse_from([
            "xtask",
            "toolchains",
            "--bless",
            "--gpu",
            "--toolchain",
            "12.8"
        ])
        .is_err());
        assert!(
            Cli::try_parse_from(["xtask", "report"]).is_err(),
            "a results file is required"
        );
    }
}
