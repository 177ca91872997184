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
}

fn count(word: &str, prefix: &str) -> Result<u32, String> {
    word.strip_prefix(prefix)
        .unwrap_or(word)
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{word:?}: expected {prefix}N or N with N >= 1"))
}

fn sass_cmd(results: &Path, chain: &str, acc: &str) -> Result<(), String> {
    let v = accprobe::variant::Variant::new(count(chain, "chain")?, count(acc, "acc")?);
    let r = RunResults::load(results).map_err(|e| e.to_string())?;
    let vr = r
        .get(v)
        .ok_or_else(|| format!("{v} is not in {}", results.display()))?;
    let s = vr.sass.as_ref().ok_or_else(|| {
        format!(
            "{} carries no SASS for {v}{}",
            results.display(),
            r.sass_unavailable
                .as_ref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        )
    })?;
    if let Some(e) = &r.environment {
        println!(
            "{v}: {} (sm {}), driver {}, NVRTC {}, {}",
            e.gpu_name, e.compute_capability, e.driver_version, e.nvrtc_version, e.date
        );
    }
    println!(
        "loop: {} FFMAs, {} chains {:?}, destinations {}; digest {}",
        s.loop_ffma,
        s.loop_chains.len(),
        s.loop_chains,
        s.loop_ffma_destinations.join(" "),
        &s.digest[..16]
    );
    let body = accprobe::sass::from_lines(&s.loop_body);
    let width = s.loop_body.iter().map(|l| l.len()).max().unwrap_or(0);
    for (instr, chain) in body.iter().zip(accprobe::sass::chain_of_each(&body)) {
        match chain {
            Some(c) => {
                let ops = instr.operands();
                println!(
                    "  {:width$}   # partial {c}: {} <- {}",
                    instr.text,
                    ops[0],
                    ops[1..].join(", ")
                );
            }
            None => println!("  {}", instr.text),
        }
    }
    Ok(())
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
    let b = bless::prepare(&p, &r, &label, &command, &file, p.baselines.as_ref());
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
        Command::Sass {
            chain,
            accumulators,
            results,
        } => sass_cmd(results, chain, accumulators),
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
