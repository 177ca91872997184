//! `cargo xtask history`: the results history (docs/history.md). `import` fills it with
//! results files written before; `list`, `trend`, `compare`, `runners` and `changes` read
//! it. One file per command; this one holds the arguments, the store and the filters.

pub(crate) mod changes;
mod compare;
mod import;
mod list;
mod runners;
#[cfg(test)]
mod tests;
pub(crate) mod trend;

use crate::{Done, Failure};
use accprobe::config::HistoryStore;
use accprobe::expectations::baselines::Baselines;
use accprobe::history::{self, read, Run, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    action: Action,
    /// The history: a file, a postgres:// URL (default: ACCPROBE_HISTORY, else
    /// target/accprobe/history.sqlite in the workspace).
    #[arg(long, global = true)]
    store: Option<String>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Add results files written before to the history: each is one run (a file already
    /// there, by its content, is not added again).
    Import {
        /// Results files (default: expectations/recorded/*.json, and
        /// target/accprobe/results.json when there).
        files: Vec<PathBuf>,
    },
    /// The runs, oldest first: when, where, on what, and their verdict.
    List {
        #[command(flatten)]
        filter: Filter,
    },
    /// One variant's median run after run as an SVG chart, with its baseline and
    /// tolerance band, the runs marked by driver and NVRTC.
    Trend {
        /// The variant (`chain13_acc2_effective2`).
        variant: String,
        #[command(flatten)]
        filter: Filter,
        /// The folder to write the chart into (default: target/accprobe/history in the
        /// workspace).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// What changed from run A to run B: environment, digests, schedules, medians beyond
    /// tolerance, case outcomes. A run is an id prefix, `last` or `last~N`.
    Compare {
        /// The earlier run.
        a: String,
        /// The later run.
        b: String,
    },
    /// Runners of one GPU model that differ: each host's median per variant against the
    /// hosts' median, beyond tolerance, and the cases whose outcome differs by host.
    Runners {
        #[command(flatten)]
        filter: Filter,
    },
    /// Change points per variant over time (the Mann-Whitney window test), per GPU model
    /// and mode.
    Changes {
        #[command(flatten)]
        filter: Filter,
        /// Only this variant.
        #[arg(long)]
        variant: Option<String>,
        /// Runs on each side of a change.
        #[arg(long, default_value_t = history::changes::Method::default().window)]
        window: usize,
        /// The largest p-value that is a change.
        #[arg(long, default_value_t = history::changes::Method::default().alpha)]
        alpha: f64,
        /// The smallest relative shift of the medians that is a change (0.001 = 0.1%).
        #[arg(long, default_value_t = history::changes::Method::default().min_shift)]
        min_shift: f64,
    },
}

/// Which runs a command reads: each given field must be part of the run's (any case).
#[derive(clap::Args, Default, Clone)]
pub struct Filter {
    /// GPU name (`H200`).
    #[arg(long)]
    gpu: Option<String>,
    /// Host name.
    #[arg(long)]
    host: Option<String>,
    /// Driver version (`580.159`).
    #[arg(long)]
    driver: Option<String>,
    /// Profile name.
    #[arg(long)]
    profile: Option<String>,
}

impl Filter {
    fn keeps(&self, r: &Run) -> bool {
        let has = |want: &Option<String>, got: Option<&str>| match want {
            None => true,
            Some(w) => got.is_some_and(|g| g.to_lowercase().contains(&w.to_lowercase())),
        };
        has(&self.gpu, r.gpu_name.as_deref())
            && has(&self.host, r.host.as_deref())
            && has(&self.driver, r.driver.as_deref())
            && has(&self.profile, Some(&r.profile))
    }
}

/// `cargo xtask history ...` with the profiles of `dir`.
pub fn run(dir: &Path, args: &HistoryArgs) -> Done {
    let store = store_of(args.store.as_deref(), "--store")?;
    match &args.action {
        Action::Import { files } => import::run(dir, &store, files),
        Action::List { filter } => list::run(&mut *open(&store)?, filter),
        Action::Trend {
            variant,
            filter,
            out,
        } => {
            let out = crate::paths::or_workspace(out, "target/accprobe/history")?;
            trend::run(dir, &mut *open(&store)?, variant, filter, &out)
        }
        Action::Compare { a, b } => compare::run(dir, &mut *open(&store)?, a, b),
        Action::Runners { filter } => runners::run(dir, &mut *open(&store)?, filter),
        Action::Changes {
            filter,
            variant,
            window,
            alpha,
            min_shift,
        } => {
            let method = history::changes::Method {
                window: *window,
                alpha: *alpha,
                min_shift: *min_shift,
            };
            changes::run(&mut *open(&store)?, filter, variant.as_deref(), &method)
        }
    }
}

/// Appends the record of `cargo xtask probe`'s run (measured, not judged) to the history
/// ACCPROBE_HISTORY names (else the workspace's); a store that cannot take it is a
/// warning, and the record waits in the spool.
pub fn record_probe(
    session: &accprobe::measure::session::GpuSession,
    results: &accprobe::model::results::RunResults,
) -> Result<(), Failure> {
    let store = store_of(None, "--store")?;
    let key = session.target().ok().and_then(|t| t.device_key());
    let about = history::About::here(
        &session.profile,
        key.as_ref().and_then(|k| k.pci_bus_id.clone()),
        key.and_then(|k| k.uuid),
    );
    let record = history::build(results, None, history::Origin::Probe, about);
    let spool = crate::paths::or_workspace(&None, "target/accprobe")?.join(history::SPOOL_DIR);
    if let Some(w) = history::write(&store, &spool, &[record]) {
        for l in w.lines() {
            warn!("{l}");
        }
    }
    Ok(())
}

/// `--store`, else ACCPROBE_HISTORY (checked when xtask started), else the workspace's
/// default file; a relative file is under the working directory.
/// The store `given` by the flag `flag` (`--store`, `--history`), else ACCPROBE_HISTORY's
/// (already checked when the command started), else the workspace's file.
pub(crate) fn store_of(given: Option<&str>, flag: &str) -> Result<HistoryStore, Failure> {
    let text = match given {
        Some(t) => Some(t.to_string()),
        None => accprobe::config::text(accprobe::config::HISTORY_ENV).map_err(|e| e.to_string())?,
    };
    if let Some(t) = text
        .as_deref()
        .filter(|t| accprobe::config::history_store(t.trim()).is_none())
    {
        let takes = accprobe::config::variable(accprobe::config::HISTORY_ENV).map(|v| v.takes);
        return Err(format!(
            "{flag} {}: expected {}",
            accprobe::config::redacted(t),
            takes.unwrap_or("a file, a postgres:// URL or off")
        )
        .into());
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    // A store that is named needs no workspace: only the default file lives in one.
    let out = match text {
        Some(_) => PathBuf::new(),
        None => crate::paths::or_workspace(&None, "target/accprobe")?,
    };
    Ok(history::resolve(text.as_deref(), &cwd, &out))
}

/// The store, for reading: one that is not there is an error saying how it fills.
pub(crate) fn open(store: &HistoryStore) -> Result<Box<dyn Store>, Failure> {
    match history::open(store, false) {
        None => Err("ACCPROBE_HISTORY=off: there is no history to read".into()),
        Some(Err(e)) => Err(format!(
            "{}: {e} (every GPU run writes it; `cargo xtask history import` fills it with results files)",
            history::name_of(store)
        )
        .into()),
        Some(Ok(s)) => Ok(s),
    }
}

/// A store error as a command's failure.
fn failed(e: history::StoreError) -> Failure {
    Failure::Message(format!("history: {e}"))
}

/// The runs `filter` keeps, oldest first.
fn runs(s: &mut dyn Store, filter: &Filter) -> Result<Vec<Run>, Failure> {
    let mut runs = read::runs(s).map_err(failed)?;
    runs.retain(|r| filter.keeps(r));
    Ok(runs)
}

/// The baselines of each profile named, from the profiles folder as it is now (a
/// profile not there: none).
struct Tolerances {
    dir: PathBuf,
    loaded: BTreeMap<String, Option<Baselines>>,
}

/// Without baselines, what counts as beyond tolerance: the gate's usual 0.5%.
const DEFAULT_TOLERANCE: f64 = 0.005;

impl Tolerances {
    fn new(dir: &Path) -> Tolerances {
        Tolerances {
            dir: dir.to_path_buf(),
            loaded: BTreeMap::new(),
        }
    }

    fn baselines(&mut self, profile: &str) -> Option<&Baselines> {
        let dir = self.dir.clone();
        self.loaded
            .entry(profile.to_string())
            .or_insert_with(|| crate::paths::find_profile(&dir, profile).ok()?.baselines)
            .as_ref()
    }

    /// `variant`'s tolerance in `profile`'s baselines, else [`DEFAULT_TOLERANCE`].
    fn of(&mut self, profile: &str, variant: &str) -> f64 {
        self.baselines(profile)
            .map_or(DEFAULT_TOLERANCE, |b| b.tolerance_of(variant))
    }
}

/// `id`'s first 12 digits: how the commands name a run.
fn short(id: &str) -> &str {
    accprobe::verdict::suspect::prefix(id, 12)
}

/// `what` of a run, `-` when unknown.
fn or_dash(what: Option<&str>) -> &str {
    what.unwrap_or("-")
}
