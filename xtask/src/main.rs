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

mod bless;
mod gate;
mod gpu;
mod report;
mod sass;

use accprobe::measure::Mode;
use accprobe::profile::{self, Profile};
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
}

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
    let (profiles, errors) = profile::load_dir(dir);
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
    accprobe::device::prepare_process_environment();
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
                std::env::set_var(accprobe::device::DEVICE_ENV, d.to_string());
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
        Command::Report { files, out } => report::run(dir, files, out),
        Command::Sass {
            chain,
            accumulators,
            results,
        } => sass::run(results, chain, accumulators),
        Command::Agree {
            profile,
            tolerance,
            out,
        } => gpu::agree(dir, profile.as_deref(), *tolerance, out),
        Command::Bench { profile, runs, out } => gpu::bench(dir, profile, *runs, out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_empty() => ExitCode::FAILURE,
        Err(e) if e.starts_with("no GPU:") => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
