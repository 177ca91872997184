//! `cargo xtask`: developer commands for accprobe (alias in .cargo/config.toml), one
//! module per task.
//!
//! - `probe`: run the matrix on the GPU, print the study's table, write a results file.
//! - `gate`: evaluate a results file against a profile, on any machine.
//! - `bless`: write a profile's generated baselines from a reviewed results file.
//! - `policy compare`: two accumulator-split policies side by side on one results file.
//! - `report`: Markdown and SVG charts from one or more results files.
//! - `sass`: a variant's SASS loop body from a results file.
//! - `agree`: serial against wave mode on the same GPU.
//! - `bench`: the GPU phase of each mode against its floor, compile cold and cached.
//! - `onboard`: a GPU no profile names: measure, draft its profile and baselines, review
//!   (`--compare` judges a draft against a hand-written profile).
//! - `ceilings`: the GPU's dependent-FFMA latency and issue rate per SM.
//! - `history`: the results history: import, list, trend, compare, runners, changes.
//! - `toolchains`: the compile-only gate over architectures x NVRTC toolchains (no GPU;
//!   `--bless` writes its digests), or the profile measured per toolchain (`--gpu`).

#[macro_use]
mod say;

mod bless;
mod commands;
mod gate;
mod gpu;
mod history;
mod onboard;
mod paths;
mod policy;
mod progress;
mod report;
mod sass;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tidy;
mod toolchains;

use accprobe::error::{GpuError, GpuErrorKind};
use accprobe::model::settings::Mode;
use clap::{Parser, Subcommand, ValueEnum};
use commands::{
    ceilings_command, onboard_command, probe_command, report_command, toolchains_command,
    ToolchainsHow,
};
use paths::or_workspace;
use std::path::PathBuf;
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

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Serial => Mode::Serial,
            ModeArg::Wave => Mode::Wave,
        }
    }
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
    /// Write `expectations/baselines/<profile>.yaml` from a measured results file, after
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
    /// Accumulator-split policies (docs/policies.md).
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
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
        /// The results history whose runs of each input's GPU, profile and mode the report
        /// shows as trends: a file, a postgres:// URL or `off` (default: ACCPROBE_HISTORY,
        /// else target/accprobe/history.sqlite in the workspace when it is there).
        #[arg(long)]
        history: Option<String>,
        /// A variant whose trend is charted whatever it shows (again for more).
        #[arg(long = "trend", value_name = "VARIANT")]
        trends: Vec<String>,
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
    /// wave mode is accepted when every base-context variant's median agrees within the
    /// tolerance (the other contexts' are shown, not judged: they move between runs).
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
    /// Onboard the GPU at hand, which no profile names: measure the study's probe with
    /// the heuristic gate's contexts serially and as a wave, then --runs more times in
    /// the mode chosen, and the GPU's ceilings; then write a draft profile
    /// `expectations/<name>.yaml` (match block, the study's probe, contexts and invariants,
    /// the mode `agree` chooses on the base context, the measured ceilings, a known
    /// deviation for each case that does not hold, wider baselines for the variants that
    /// moved between runs), its baselines and its recorded results, and print what to
    /// review.
    /// Never overwrites a file; refuses under CI. With --compare: judge a drafted profile
    /// against a hand-written one instead (no GPU).
    Onboard {
        /// The profile's name (default: the GPU's name as a slug, `NVIDIA H200` -> h200).
        #[arg(long)]
        name: Option<String>,
        /// CUDA device ordinal (default 0; same as ACCPROBE_DEVICE).
        #[arg(long)]
        device: Option<usize>,
        /// Where to keep the measurements (default: target/accprobe/onboard in the
        /// workspace).
        #[arg(long)]
        out: Option<PathBuf>,
        /// How many more runs to measure in the chosen mode after the serial and wave
        /// ones: every variant's steadiness over all runs gives the draft's wider
        /// baselines (0: the serial and wave runs alone).
        #[arg(long, default_value_t = accprobe::onboard::DEFAULT_RUNS)]
        runs: usize,
        /// A drafted profile to compare with --against (its known deviations by case,
        /// its baselines within the hand-written baselines' tolerance); exits 1 when they
        /// disagree.
        #[arg(long, requires = "against", conflicts_with_all = ["name", "device", "out", "runs"])]
        compare: Option<PathBuf>,
        /// The hand-written profile --compare judges the draft against.
        #[arg(long, requires = "compare")]
        against: Option<PathBuf>,
    },
    /// Measure the GPU's physical ceilings (kernels/ceilings.cu): the dependent-FFMA
    /// latency and the FFMA issue rate per SM, printed against the validity of the
    /// profile that matches the GPU.
    Ceilings {
        /// CUDA device ordinal (default 0; same as ACCPROBE_DEVICE).
        #[arg(long)]
        device: Option<usize>,
        /// Where to write them (JSON; default: target/accprobe/ceilings.json in the
        /// workspace).
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
        /// Write `expectations/baselines/<profile>-compile.yaml` (refused under CI).
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
    /// The results history (docs/history.md): import results files, list the runs, a
    /// variant's trend, two runs compared, the runners that differ, change points.
    History(history::HistoryArgs),
}

#[derive(Subcommand)]
enum PolicyAction {
    /// Two policies side by side on one results file: in every context of the profile,
    /// each one's pick, the best K, the loss of each pick against it, and where B helps or
    /// hurts A. Exits 1 when B hurts anywhere beyond the profile's policy_gate.tolerance,
    /// else 3 when a context cannot be compared (a pick the results do not hold), else 0.
    Compare {
        /// The results file to place the picks on.
        #[arg(long)]
        results: PathBuf,
        /// Profile name (default: the profile the results were measured under).
        #[arg(long)]
        profile: Option<String>,
        /// A policy file (.yaml) or a policy program and its arguments, split on whitespace
        /// (`python3 examples/policies/study.py`): give it twice, A then B.
        #[arg(long, required = true)]
        policy: Vec<String>,
    },
}

/// How a command failed; the exit code comes from the type.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Failure {
    /// Already reported (failing verdicts were printed): exit 1.
    #[error("failed (reported above)")]
    Printed,
    /// Already reported: `policy compare` could not compare every context (a pick the
    /// results do not hold, a policy that gave no picks) and found no hurt: exit 3.
    #[error("not compared everywhere (reported above)")]
    Incomparable,
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
pub type Done = Result<(), Failure>;

fn run(cli: &Cli) -> Done {
    let dir = &or_workspace(&cli.expectations, "expectations")?;
    match &cli.command {
        Command::Probe {
            device,
            profile,
            mode: m,
            out,
        } => probe_command(dir, *device, profile.as_deref(), m.map(Mode::from), out),
        Command::Gate { results, profile } => gate::run(dir, results, profile.as_deref()),
        Command::Bless {
            profile,
            from,
            allow_invalid,
            dry_run,
        } => bless::run(dir, profile, from, *allow_invalid, *dry_run),
        Command::Policy {
            action:
                PolicyAction::Compare {
                    results,
                    profile,
                    policy: specs,
                },
        } => policy::run(dir, results, profile.as_deref(), specs),
        Command::Report {
            files,
            out,
            history,
            trends,
        } => report_command(dir, files, out, history.as_deref(), trends),
        Command::Sass {
            chain,
            accumulators,
            results,
        } => {
            let file = or_workspace(results, sass::DEFAULT_RESULTS)?;
            sass::run(&file, results.is_some(), chain, accumulators).map_err(Failure::from)
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
        Command::Onboard {
            name,
            device,
            out,
            runs,
            compare,
            against,
        } => onboard_command(dir, name.as_deref(), *device, out, *runs, compare, against),
        Command::Ceilings { device, out } => ceilings_command(dir, *device, out),
        Command::Toolchains {
            profile,
            bless,
            dry_run,
            gpu,
            toolchain,
            compare,
            out,
        } => {
            let how = ToolchainsHow {
                bless: *bless,
                dry_run: *dry_run,
                gpu: *gpu,
            };
            toolchains_command(dir, profile.as_deref(), how, toolchain, compare, out)
        }
        Command::History(args) => history::run(dir, args),
    }
}

/// What every command needs before it parses its arguments: the NVRTC selected, the
/// interrupt handler, the trace, the device environment and the compile settings. An
/// error here is a bad configuration: exit 2.
fn start() -> Result<(), StartError> {
    accprobe::compile::process_nvrtc::select_for_process()?;
    // Before any thread: NVRTC's own signal handler must never end (or hang) the process.
    accprobe::interrupt::install("xtask", |name| warn!("xtask: interrupted by {name}"));
    accprobe::trace::start()?;
    accprobe::measure::device::prepare_process_environment();
    accprobe::config::check()?;
    Ok(())
}

/// Why a command could not start: the NVRTC it was given, or the environment's settings.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Toolchain(#[from] accprobe::compile::toolchain::ToolchainError),
    #[error(transparent)]
    Config(#[from] accprobe::config::ConfigError),
}

/// The exit code of a command's outcome, its error printed: 1 for a failure, 2 for a GPU
/// that is missing or configured wrong, 3 for a comparison `policy compare` could not make
/// everywhere.
fn exit_code(result: Done) -> ExitCode {
    let (message, code) = match result {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::Printed) => return ExitCode::FAILURE,
        Err(Failure::Incomparable) => return ExitCode::from(3),
        Err(Failure::Gpu(e)) => match e.kind() {
            // The error already says what is missing ("no CUDA driver: ...").
            GpuErrorKind::Unavailable => (format!("{e} (this command needs a CUDA GPU)"), 2),
            GpuErrorKind::Config => (e.to_string(), 2),
            GpuErrorKind::Broken | GpuErrorKind::Busy => (e.to_string(), 1),
        },
        Err(Failure::Message(e)) => (e, 1),
    };
    warn!("error: {message}");
    ExitCode::from(code)
}

fn main() -> ExitCode {
    if let Some(code) = accprobe::compile::worker::worker_main() {
        return code;
    }
    if let Err(e) = start() {
        warn!("error: {e}");
        return ExitCode::from(2);
    }
    let result = run(&Cli::parse());
    let succeeded = result.is_ok();
    let code = exit_code(result);
    // Output that did not reach stdout (other than into a closed pipe) fails a command
    // that otherwise succeeded: see `say`.
    match say::stdout_failure() {
        Some(e) => {
            warn!("error: {e}");
            if succeeded {
                ExitCode::FAILURE
            } else {
                code
            }
        }
        None => code,
    }
}

#[cfg(test)]
mod tests {
    //! The command line: its usage, help and argument checks.
    use super::*;

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
