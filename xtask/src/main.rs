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

mod bless;
mod gate;
mod gpu;
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
    about = "accprobe developer commands: measure on the GPU, judge and bless results, report",
    long_about = "accprobe developer commands. `probe`, `agree` and `bench` need a CUDA GPU; \
                  `gate`, `bless`, `report` and `sass` work on results files anywhere."
)]
struct Cli {
    /// The folder of profiles (default: the workspace's expectations/, else ./expectations).
    #[arg(long, global = true, default_value_os_t = workspace().join("expectations"))]
    expectations: PathBuf,
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
        /// Where to write the results.
        #[arg(long, default_value_os_t = workspace().join("target/accprobe/probe.json"))]
        out: PathBuf,
    },
    /// Evaluate a results file against a profile and print every verdict; exits 1 on any
    /// failure. `--results` may be any measured file; the documented profile's recorded
    /// table is replayed by the test suite itself.
    Gate {
        /// A results file written by the GPU suite (target/accprobe/results.json), by
        /// `probe`, or committed under docs/results/.
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
        /// The folder to write report.md and the charts into.
        #[arg(long, default_value_os_t = workspace().join("target/accprobe/report"))]
        out: PathBuf,
    },
    /// Print a variant's measured SASS loop body from a results file, each FFMA marked
    /// with the partial accumulator (dependency chain) it extends.
    /// Example: `cargo xtask sass chain29 acc4`.
    Sass {
        /// Chain length: `chain29` or `29`.
        chain: String,
        /// Accumulator count: `acc4` or `4`.
        accumulators: String,
        /// The results file to read.
        #[arg(long, default_value_os_t = workspace().join("target/accprobe/results.json"))]
        results: PathBuf,
    },
    /// Measure the profile serially and as a wave on this GPU and compare each variant;
    /// wave mode is accepted when every variant's median agrees within the tolerance.
    Agree {
        #[arg(long)]
        profile: Option<String>,
        /// Largest accepted relative difference of medians.
        #[arg(long, default_value_t = 0.005)]
        tolerance: f64,
        #[arg(long, default_value_os_t = workspace().join("target/accprobe/agreement.json"))]
        out: PathBuf,
    },
    /// Benchmark the gate: GPU phase of each mode against its floor (budget x launches /
    /// SM clock), NVRTC compile cold and cached; medians of several runs.
    Bench {
        /// The profile whose matrix is timed (default: the study's 24 variants).
        #[arg(long, default_value = "documented")]
        profile: String,
        #[arg(long, default_value_t = 5)]
        runs: usize,
        #[arg(long, default_value_os_t = workspace().join("target/accprobe/bench.json"))]
        out: PathBuf,
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
        /// Where --gpu writes each toolchain's results and toolchains.md.
        #[arg(long, default_value_os_t = workspace().join("target/accprobe/toolchains"))]
        out: PathBuf,
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

/// The workspace root: where this xtask was built from, or the working directory when run
/// as a copied binary on a machine without the source tree there.
pub fn workspace() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf);
    match built {
        Some(p) if p.join("expectations").is_dir() => p,
        _ => PathBuf::from("."),
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

fn main() -> ExitCode {
    if let Some(code) = accprobe::compile::toolchain::worker_main() {
        return code;
    }
    if let Err(e) = accprobe::compile::toolchain::select_for_process() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    accprobe::measure::device::prepare_process_environment();
    let cli = Cli::parse();
    let dir = &cli.expectations;
    let mode = |m: &Option<ModeArg>| {
        m.map(|m| match m {
            ModeArg::Serial => Mode::Serial,
            ModeArg::Wave => Mode::Wave,
        })
    };
    let result = match &cli.command {
        Command::Probe {
            device,
            profile,
            mode: m,
            out,
        } => {
            if let Some(d) = device {
                std::env::set_var(accprobe::measure::device::DEVICE_ENV, d.to_string());
            }
            gpu::probe(dir, profile.as_deref(), mode(m), out)
        }
        Command::Gate { results, profile } => gate::run(dir, results, profile.as_deref()),
        Command::Bless {
            profile,
            from,
            allow_invalid,
            dry_run,
        } => bless::run(dir, profile, from, *allow_invalid, *dry_run),
        Command::Report { files, out } => report::run(dir, files, out).map_err(Failure::from),
        Command::Sass {
            chain,
            accumulators,
            results,
        } => sass::run(results, chain, accumulators).map_err(Failure::from),
        Command::Agree {
            profile,
            tolerance,
            out,
        } => gpu::agree(dir, profile.as_deref(), *tolerance, out),
        Command::Bench { profile, runs, out } => gpu::bench(dir, profile, *runs, out),
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
                toolchains::gpu(dir, profile.as_deref(), toolchain, out)
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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Printed) => ExitCode::FAILURE,
        Err(Failure::Gpu(e)) => match e.kind() {
            GpuErrorKind::Unavailable => {
                eprintln!("error: no GPU: {e}");
                ExitCode::from(2)
            }
            GpuErrorKind::Config => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            GpuErrorKind::Broken => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Err(Failure::Message(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    //! The xtask commands on the committed results files, no GPU needed.
    use super::*;

    fn expectations() -> PathBuf {
        workspace().join("expectations")
    }

    fn committed() -> PathBuf {
        workspace().join("expectations/recorded/h200-2026-11-29.json")
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
        let s = v.summary.as_mut().unwrap();
        s.median *= 0.97;
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
    fn report_writes_markdown_and_readable_svg_charts_from_the_committed_runs() {
        let dir = temp("report");
        let wave = workspace().join("expectations/recorded/h200-2026-11-29-wave.json");
        report::run(&expectations(), &[committed(), wave], &dir).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.starts_with("<!-- Generated by `cargo xtask report`"));
        assert!(
            md.contains("| 13 | 108,577.5 | 144,927.0 | 140,844.0 | 149,253.0* |"),
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
        }
        assert!(report::run(&expectations(), &[], &dir)
            .unwrap_err()
            .contains("at least one"));
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
            md.contains("| chain13_acc2_effective2 | 144927.0 | 152173.4 (+5.00%) |"),
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
