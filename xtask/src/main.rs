//! `cargo xtask`: developer commands for accprobe (alias in .cargo/config.toml).
//!
//! - `gate`: evaluate a results file against a profile on any machine.
//! - `bless`: write a profile's generated baselines from a reviewed results file.

use accprobe::bless;
use accprobe::profile::{self, Profile};
use accprobe::report;
use accprobe::results::RunResults;
use accprobe::verdict::{self, Outcome};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "accprobe developer commands")]
struct Cli {
    /// The folder of profiles.
    #[arg(long, global = true, default_value_os_t = workspace().join("expectations"))]
    expectations: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a results file against a profile and print every verdict; exits 1 on any
    /// failure. Works without a GPU: the verdicts read only the file.
    Gate {
        /// A results file written by the GPU suite (target/accprobe/results.json) or
        /// committed under docs/results/.
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
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn find_profile(dir: &Path, name: &str) -> Result<Profile, String> {
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

fn gate(dir: &Path, results: &Path, profile: Option<&str>) -> Result<bool, String> {
    let r = RunResults::load(results).map_err(|e| e.to_string())?;
    let p = find_profile(dir, profile.unwrap_or(&r.profile))?;
    println!(
        "{}",
        report::table(&r, &p.probe.chains, &p.probe.accumulators)
    );
    let mut failed = 0;
    for case in p.cases() {
        let (tag, text) = match verdict::evaluate(&case, &p, &r) {
            Outcome::Pass(d) => ("ok     ", d),
            Outcome::Fail(m) => {
                failed += 1;
                ("FAILED ", m)
            }
            Outcome::Skipped(reason) => ("skipped", reason),
            Outcome::KnownDeviation { reason, detail } => {
                ("ignored", format!("known deviation: {reason} ({detail})"))
            }
        };
        println!("{tag} {}: {text}", case.name);
    }
    println!(
        "\ngate: {} against profile {:?}: {}",
        results.display(),
        p.name,
        if failed == 0 {
            "passed".to_string()
        } else {
            format!("{failed} failed")
        }
    );
    Ok(failed == 0)
}

fn bless_cmd(
    dir: &Path,
    name: &str,
    from: &Path,
    allow_invalid: bool,
    dry_run: bool,
) -> Result<(), String> {
    let p = find_profile(dir, name)?;
    let r = RunResults::load(from).map_err(|e| e.to_string())?;
    bless::check(&p, &r, allow_invalid).map_err(|e| e.to_string())?;
    let file = p
        .baselines
        .as_ref()
        .map(|b| b.file.clone())
        .unwrap_or_else(|| dir.join("baselines").join(format!("{name}.yaml")));
    let label = from
        .strip_prefix(workspace())
        .unwrap_or(from)
        .display()
        .to_string();
    let command = format!("cargo xtask bless --profile {name} --from {label}");
    let b = bless::prepare(
        &p,
        &r,
        &label,
        &command,
        &file,
        p.baselines.as_ref().map(|b| &b.progress),
    );
    if b.diff.is_empty() {
        println!("{}: no baseline changes", file.display());
    } else {
        println!("{}: {} change(s)", file.display(), b.diff.len());
        for line in &b.diff {
            println!("  {line}");
        }
    }
    if dry_run {
        return Ok(());
    }
    b.write().map_err(|e| e.to_string())?;
    if p.baselines.is_none() {
        println!("written; now reference it from {}:\nbaselines:\n  file: baselines/{name}.yaml\n  tolerance: 0.005", p.file.display());
    } else {
        println!("written; review it with `git diff {}`", file.display());
    }
    Ok(())
}

/// An empty error: the failures were already printed.
trait OkOrDefault {
    fn ok_or_default(self) -> Result<(), String>;
}

impl OkOrDefault for Option<()> {
    fn ok_or_default(self) -> Result<(), String> {
        self.ok_or_else(String::new)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Gate { results, profile } => gate(&cli.expectations, results, profile.as_deref())
            .and_then(|ok| ok.then_some(()).ok_or_default()),
        Command::Bless {
            profile,
            from,
            allow_invalid,
            dry_run,
        } => bless_cmd(&cli.expectations, profile, from, *allow_invalid, *dry_run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            ExitCode::FAILURE
        }
    }
}
