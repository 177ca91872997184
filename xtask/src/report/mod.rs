//! `cargo xtask report`: a Markdown summary and SVG charts from one or more results files
//! (several GPUs or drivers side by side), with the study's recorded numbers as reference.
//! This file reads the inputs and names and writes the files; `markdown.rs` writes
//! report.md's text, `charts.rs` draws the charts in their frame (`frame.rs`), `policy_map.rs` the policy
//! map, `probe_vs_real.rs` the probe beside the real accumulations, and `layout.rs` says how
//! much room text takes on them.

pub(crate) mod charts;
#[cfg(test)]
mod drawn;
pub(crate) mod frame;
mod layout;
mod markdown;
mod policy_map;
mod probe_vs_real;
#[cfg(test)]
mod tests;
pub(crate) mod trends;
#[cfg(test)]
mod written;

use crate::paths::{find_profile, NoProfile};
use crate::Failure;
use accprobe::error::Error;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::output::write_atomic;
use accprobe::text::Shown;
use std::path::{Path, PathBuf};

/// A results file with the profile it is judged against and a short label.
struct Input {
    label: String,
    file: PathBuf,
    results: RunResults,
    profile: Profile,
    /// The gated policy's picks, asked once (a program runs once per input).
    picks: Option<accprobe::expectations::policy_source::Picks>,
}

fn label(r: &RunResults, file: &Path) -> String {
    match &r.environment {
        Some(e) => format!("{} / {} mode", e.fingerprint(), r.mode.name()),
        None => file
            .file_stem()
            .map_or("results".into(), |s| s.to_string_lossy().into_owned()),
    }
}

/// The longest slug a chart's file name is built from: a label may hold a whole input
/// path (see [`distinguish`]), and a file name component has at most 255 bytes.
const SLUG_CHARS: usize = 48;

/// `s` as a short file name component: lowercase ASCII letters and digits joined by `-`,
/// at most [`SLUG_CHARS`] characters.
pub(crate) fn slug(s: &str) -> String {
    let full = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    full.chars()
        .take(SLUG_CHARS)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// Makes every input's label distinct, so that headings, legends and chart files tell
/// them apart: a label two inputs share gets the file name, and where even that repeats
/// (one file given twice), a number.
fn distinguish(inputs: &mut [Input]) {
    let shared: Vec<String> = inputs
        .iter()
        .map(|i| i.label.clone())
        .filter(|l| inputs.iter().filter(|j| &j.label == l).count() > 1)
        .collect();
    for i in inputs.iter_mut() {
        if shared.contains(&i.label) {
            i.label = format!("{} ({})", i.label, i.file.shown());
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for i in inputs.iter_mut() {
        let n = seen.iter().filter(|l| **l == i.label).count();
        seen.push(i.label.clone());
        if n > 0 {
            i.label = format!("{} #{}", i.label, n + 1);
        }
    }
}

/// `stem.ext`, or `stem-2.ext`, `stem-3.ext`... when a name is already in `used`: two
/// charts never share a file (slugs of distinct labels can coincide).
fn unique_name(used: &mut Vec<String>, stem: &str, ext: &str) -> String {
    let mut name = format!("{stem}.{ext}");
    let mut n = 1;
    while used.contains(&name) || name == "gain.svg" {
        n += 1;
        name = format!("{stem}-{n}.{ext}");
    }
    used.push(name.clone());
    name
}

/// Why `file` is another kind of JSON than a results file, if it is: a JSON object
/// without the `schema` every results file has (what `agree` and `bench` write, which a
/// glob such as `docs/results/*.json` also matches). Anything else is left to the results
/// reader, so that a broken results file is an error, not skipped.
fn other_json(file: &Path) -> Option<String> {
    let text = accprobe::input::read_text(file, "results", accprobe::input::RESULTS_LIMIT).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let object = value.as_object()?;
    if object.contains_key("schema") {
        return None;
    }
    let kind = if object.contains_key("tolerance") && object.contains_key("accepted") {
        "an agreement file (cargo xtask agree)"
    } else if object.contains_key("runs") && object.contains_key("median_wave_gpu_s") {
        "a bench file (cargo xtask bench)"
    } else {
        "a JSON object without a results `schema`"
    };
    Some(format!("not a results file: {kind}"))
}

/// Why no report was written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("give at least one results file")]
    NoFiles,
    #[error(transparent)]
    NoProfile(#[from] NoProfile),
    #[error("the documented profile has no recorded table")]
    NoRecordedTable,
    /// A results file that could not be read.
    #[error(transparent)]
    Results(Error),
    #[error("none of {} is a results file", list(.0))]
    NoResults(Vec<PathBuf>),
    #[error("cannot create {}: {source}", dir.shown())]
    CreateFolder {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot draw {}: {error}", path.shown())]
    Draw {
        path: PathBuf,
        error: frame::DrawError,
    },
    /// The results history could not be read.
    #[error("history: {0}")]
    History(String),
    #[error(
        "{} is there and was not written by `cargo xtask report` (it does not begin with the \
         generated-by line), so it is not overwritten: move it away or give another --out",
        .0.shown()
    )]
    NotOurs(PathBuf),
    #[error("cannot write {}: {source}", path.shown())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.shown())
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<ReportError> for Failure {
    fn from(e: ReportError) -> Failure {
        Failure::Message(e.to_string())
    }
}

/// Why the chart for `path` could not be drawn, naming it.
fn chart_error(path: &Path, error: frame::DrawError) -> ReportError {
    ReportError::Draw {
        path: path.to_path_buf(),
        error,
    }
}

/// The first line of every file the report writes (an XML comment, so an SVG too can
/// begin with it). An existing file in `--out` that does not begin with it was not written
/// by the report, so it is not overwritten.
pub(crate) const GENERATED: &str =
    "<!-- Generated by `cargo xtask report`; do not edit by hand. -->\n";

/// Whether `path` may be written: it does not exist, or it begins with [`GENERATED`]
/// (only that many bytes are read).
fn ours_or_absent(path: &Path) -> Result<(), ReportError> {
    use std::io::Read;
    let cannot = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(cannot(source)),
    };
    let mut head = Vec::with_capacity(GENERATED.len());
    file.take(GENERATED.len() as u64)
        .read_to_end(&mut head)
        .map_err(cannot)?;
    if head == GENERATED.as_bytes() {
        Ok(())
    } else {
        Err(ReportError::NotOurs(path.to_path_buf()))
    }
}

/// Writes [`GENERATED`] and `text` to `path`, atomically, like every output, unless a file
/// the report did not write is there; an error names the file.
fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    ours_or_absent(path)?;
    write_atomic(path, &format!("{GENERATED}{text}")).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Draws `input`'s policy map into `policy-map-<label>.svg` in `out` and returns the
/// Markdown that shows it; without a policy gate nothing, and for a policy that gave no
/// picks a line saying why.
fn policy_map(input: &Input, out: &Path, used: &mut Vec<String>) -> Result<String, ReportError> {
    let Some(gate) = &input.profile.policy_gate else {
        return Ok(String::new());
    };
    let policy = gate.source.name();
    let cells = match policy_map::cells(input) {
        Ok(cells) => cells,
        Err(why) => {
            return Ok(format!(
                "Policy map of {}: not drawn: {}\n\n",
                accprobe::text::markdown_code(policy),
                accprobe::text::markdown(&why)
            ))
        }
    };
    let name = unique_name(used, &format!("policy-map-{}", slug(&input.label)), "svg");
    let mut svg = String::new();
    policy_map::draw(&mut svg, &cells, policy, &input.label, gate.tolerance)
        .map_err(|e| chart_error(&out.join(&name), e))?;
    write_file(&out.join(&name), &svg)?;
    Ok(format!(
        "Policy map: the pick of policy {} in each context against the best K measured there ({}):\n\n![policy map, {}]({name})\n\n",
        accprobe::text::markdown_code(policy),
        "green: no loss, yellow: the tolerance, red: twice it",
        accprobe::text::markdown(&input.label)
    ))
}

/// Writes `report.md`, `progress-<gpu>.svg` and `policy-map-<gpu>.svg` per input and
/// `gain.svg` into `out`; with a `history`, its section per input and the trend charts
/// (`trend-<gpu>-<variant>.svg`).
pub fn run(
    dir: &Path,
    files: &[PathBuf],
    out: &Path,
    history: Option<&mut trends::History>,
) -> Result<(), ReportError> {
    if files.is_empty() {
        return Err(ReportError::NoFiles);
    }
    let study_profile = find_profile(dir, accprobe::catalog::DOCUMENTED)?;
    let study = study_profile
        .recorded
        .clone()
        .ok_or(ReportError::NoRecordedTable)?;
    let mut inputs = Vec::new();
    for f in files {
        if let Some(what) = other_json(f) {
            warn!("report: skipped {}: {what}", f.shown());
            continue;
        }
        let results = RunResults::load(f).map_err(ReportError::Results)?;
        let profile = find_profile(dir, &results.profile)?;
        inputs.push(Input {
            label: label(&results, f),
            file: f.clone(),
            picks: accprobe::policy_gate::ask(&profile, Some(&results)),
            results,
            profile,
        });
    }
    distinguish(&mut inputs);
    if inputs.is_empty() {
        return Err(ReportError::NoResults(files.to_vec()));
    }
    std::fs::create_dir_all(out).map_err(|source| ReportError::CreateFolder {
        dir: out.to_path_buf(),
        source,
    })?;
    let mut charts_written: Vec<String> = Vec::new();
    let mut md = markdown::intro(&inputs);
    for i in &inputs {
        let chart = unique_name(
            &mut charts_written,
            &format!("progress-{}", slug(&i.label)),
            "svg",
        );
        let mut svg = String::new();
        charts::progress_chart(&mut svg, i, &study)
            .map_err(|e| chart_error(&out.join(&chart), e))?;
        write_file(&out.join(&chart), &svg)?;
        md.push_str(&markdown::section(i, &chart));
        md.push_str(&policy_map(i, out, &mut charts_written)?);
        md.push_str(&probe_vs_real::section(i));
    }
    md.push_str(&markdown::invariants(&inputs));
    md.push_str(&markdown::toolchain_view(&inputs));
    if let Some(h) = history {
        md.push_str("## The results history\n\n");
        for i in &inputs {
            md.push_str(&trends::section(h, i, out, &mut charts_written)?);
        }
    }
    let chains = inputs[0].profile.probe.chains.clone();
    let gain = out.join("gain.svg");
    let mut svg = String::new();
    charts::gain_chart(&mut svg, &inputs, &study, &chains).map_err(|e| chart_error(&gain, e))?;
    write_file(&gain, &svg)?;
    let path = out.join("report.md");
    write_file(&path, &md)?;
    say!("report: {} (and SVG charts beside it)", path.shown());
    Ok(())
}
