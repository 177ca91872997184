//! The commands whose arguments need more than one call: each `cargo xtask` subcommand
//! that picks its defaults, sets the device or opens a store before its module runs.

use crate::paths::or_workspace;
use crate::{gpu, history, onboard, report, toolchains, Done, Failure};
use accprobe::model::settings::Mode;
use std::path::{Path, PathBuf};

/// `cargo xtask report`: the pages for the result files, with the history's
/// section when a store is there.
pub(crate) fn report_command(
    dir: &Path,
    files: &[PathBuf],
    out: &Option<PathBuf>,
    history: Option<&str>,
    trends: &[String],
) -> Done {
    let out = or_workspace(out, "target/accprobe/report")?;
    let mut h = report_history(history, trends)?;
    report::run(dir, files, &out, h.as_mut()).map_err(Failure::from)
}

/// The switches of `cargo xtask toolchains`.
#[derive(Clone, Copy)]
pub(crate) struct ToolchainsHow {
    pub(crate) bless: bool,
    pub(crate) dry_run: bool,
    pub(crate) gpu: bool,
}

/// `cargo xtask toolchains`: measured on the GPU, compared from files, or compiled only.
pub(crate) fn toolchains_command(
    dir: &Path,
    profile: Option<&str>,
    how: ToolchainsHow,
    toolchain: &[String],
    compare: &[PathBuf],
    out: &Option<PathBuf>,
) -> Done {
    if how.gpu {
        let out = or_workspace(out, "target/accprobe/toolchains")?;
        toolchains::gpu(dir, profile, toolchain, &out)
    } else if !compare.is_empty() {
        toolchains::compare_files(dir, profile, compare)
    } else {
        toolchains::compile_only(dir, profile.unwrap_or("h200"), how.bless, how.dry_run)
    }
}

/// `cargo xtask probe`: the profile measured on the device.
pub(crate) fn probe_command(
    dir: &Path,
    device: Option<usize>,
    profile: Option<&str>,
    mode: Option<Mode>,
    out: &Option<PathBuf>,
) -> Done {
    set_device(device);
    let out = or_workspace(out, "target/accprobe/probe.json")?;
    gpu::probe(dir, profile, mode, &out)
}

/// `cargo xtask ceilings`: the device's ceilings measured.
pub(crate) fn ceilings_command(dir: &Path, device: Option<usize>, out: &Option<PathBuf>) -> Done {
    set_device(device);
    let out = or_workspace(out, "target/accprobe/ceilings.json")?;
    onboard::ceilings(dir, &out)
}

/// `cargo xtask onboard`: a draft compared with a profile (`--compare` and `--against`),
/// or a GPU onboarded.
pub(crate) fn onboard_command(
    dir: &Path,
    name: Option<&str>,
    device: Option<usize>,
    out: &Option<PathBuf>,
    runs: usize,
    compare: &Option<PathBuf>,
    against: &Option<PathBuf>,
) -> Done {
    match (compare, against) {
        (Some(draft), Some(against)) => onboard::compare(draft, against),
        _ => {
            set_device(device);
            let out = or_workspace(out, onboard::default_out())?;
            onboard::run(dir, name, runs, &out)
        }
    }
}

/// `--device`: the ordinal as ACCPROBE_DEVICE, which device detection reads.
pub(crate) fn set_device(device: Option<usize>) {
    if let Some(d) = device {
        std::env::set_var(accprobe::measure::device::DEVICE_ENV, d.to_string());
    }
}

/// The history `cargo xtask report` reads: `--history`, else ACCPROBE_HISTORY, else the
/// workspace's file when it is there (a machine that never ran the GPU has none, and its
/// report has no history section); `off`: none. A store named but not readable fails.
pub(crate) fn report_history(
    given: Option<&str>,
    asked: &[String],
) -> Result<Option<report::trends::History>, Failure> {
    let named = given.is_some() || matches!(accprobe::config::history(), Ok(Some(_)));
    let store = match history::store_of(given, "--history") {
        // Unnamed, the default history is only the workspace's file: outside a workspace
        // there is none, and a report needs none.
        Err(_) if !named && asked.is_empty() => return Ok(None),
        store => store?,
    };
    if store == accprobe::config::HistoryStore::Off && !asked.is_empty() {
        return Err(format!(
            "--trend {}: no history to chart it from (the history is off)",
            asked[0]
        )
        .into());
    }
    match accprobe::history::open(&store, false) {
        None => Ok(None),
        Some(Ok(store)) => Ok(Some(report::trends::History {
            store,
            asked: asked.to_vec(),
        })),
        Some(Err(_)) if !named && asked.is_empty() => Ok(None),
        Some(Err(_)) => history::open(&store).map(|_| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(r: Result<Option<report::trends::History>, Failure>) -> String {
        match r {
            Err(Failure::Message(m)) => m,
            Err(other) => panic!("not a message: {other:?}"),
            Ok(h) => panic!("accepted, history read: {}", h.is_some()),
        }
    }

    #[test]
    fn a_bad_history_names_the_report_flag_and_what_it_takes() {
        let e = error_of(report_history(Some("postgres://h/db?sslmode=require"), &[]));
        assert!(
            e.starts_with("--history postgres://h/db?sslmode=require: expected a file"),
            "{e}"
        );
        assert!(e.contains("without TLS"), "{e}");
        let e = error_of(report_history(Some("sqlite://x.db"), &[]));
        assert!(e.starts_with("--history sqlite://x.db: expected"), "{e}");
    }

    #[test]
    fn a_trend_asked_for_with_the_history_off_is_an_error_not_silence() {
        let e = error_of(report_history(
            Some("off"),
            &["chain13_acc2_effective2".into()],
        ));
        assert!(e.contains("--trend chain13_acc2_effective2"), "{e}");
        assert!(e.contains("the history is off"), "{e}");
        assert!(matches!(report_history(Some("off"), &[]), Ok(None)));
    }
}
