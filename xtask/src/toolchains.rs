//! `cargo xtask toolchains`: the toolchain matrix.
//!
//! - Without `--gpu`: the compile-only gate of a profile (every architecture x toolchain of
//!   its `compile_only:` section, no GPU), summarised; `--bless` writes its digests.
//! - With `--gpu`: the profile measured on this GPU under each `--toolchain` (one process
//!   each, `ACCPROBE_NVRTC` set), then compared side by side. A toolchain whose CUBIN the
//!   driver refuses is recorded as such; the others are compared.
//! - `--compare FILE...`: the same comparison from results files already measured.

use crate::paths::find_profile;
use accprobe::child::Job;
use accprobe::compile::{process_nvrtc::NVRTC_ENV, toolchain};
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::model::variant::Variant;
use accprobe::output::write_atomic;
use accprobe::text::Shown;
use accprobe::text::{self, markdown};
use accprobe::verdict::{self, cases::cases, Outcome};

mod compile;
mod schedule;

pub use compile::compile_only;
use std::path::{Path, PathBuf};

/// One toolchain's GPU run: its results, or why the GPU could not run its CUBIN.
#[derive(Debug, Clone)]
pub struct Measured {
    pub toolchain: String,
    pub outcome: Result<RunResults, NotMeasured>,
}

/// Why a toolchain's GPU run gave no results.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotMeasured {
    /// The run finished but its results file could not be read.
    #[error(transparent)]
    Results(accprobe::error::Error),
    /// The driver refused the CUBIN ([`driver_refused`]); `said` is the run's last line.
    #[error("the driver cannot run CUBINs from NVRTC {toolchain}: {said}")]
    DriverRefused { toolchain: String, said: String },
    #[error("the run under NVRTC {toolchain} failed ({status}): {said}")]
    Failed {
        toolchain: String,
        status: std::process::ExitStatus,
        said: String,
    },
    #[error(
        "the run under NVRTC {toolchain} did not finish within {limit_s} s and was killed: {said}"
    )]
    TimedOut {
        toolchain: String,
        limit_s: u64,
        said: String,
    },
}

/// How long one toolchain's `cargo xtask probe` may take: a measurement takes about a
/// minute (docs/speed.md), after waiting at most `ACCPROBE_LOCK_TIMEOUT` for the GPU.
fn probe_limit() -> std::time::Duration {
    let lock_wait = accprobe::ownership::lock::LockSettings::from_env()
        .map_or(accprobe::ownership::lock::DEFAULT_TIMEOUT, |l| l.timeout);
    std::time::Duration::from_secs(30 * 60) + lock_wait
}

/// Whether a failed run's message says the driver refused the CUBIN (a newer NVRTC than
/// the driver supports).
pub fn driver_refused(message: &str) -> bool {
    [
        "loading the CUBIN",
        "UNSUPPORTED_PTX_VERSION",
        "INVALID_IMAGE",
        "NO_BINARY_FOR_GPU",
    ]
    .iter()
    .any(|w| message.contains(w))
}

/// A toolchain as given (`12.8`, or a folder such as `/usr/local/cuda/lib64`) as one file
/// name component: letters, digits, `.` and `-`; anything else becomes `_`.
fn file_stem(toolchain: &str) -> String {
    let s = accprobe::output::file_safe(toolchain.trim_matches('/'), '_');
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

/// `cargo xtask toolchains --gpu --toolchain A --toolchain B`: the profile measured under
/// each toolchain, one `cargo xtask probe` process each, then compared.
pub fn gpu(dir: &Path, profile: Option<&str>, toolchains: &[String], out: &Path) -> crate::Done {
    if toolchains.is_empty() {
        return Err("name the toolchains to compare: --toolchain 12.8 --toolchain 13.0".into());
    }
    let root = toolchain::default_root();
    for t in toolchains {
        toolchain::resolve(t, &root).map_err(|e| e.to_string())?;
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.shown()))?;
    let mut runs = Vec::new();
    for t in toolchains {
        let file = out.join(format!("results-nvrtc-{}.json", file_stem(t)));
        warn!("accprobe: measuring under NVRTC {t} -> {}", file.shown());
        let mut job = Job::new(&exe, probe_limit())
            .arg("--expectations")
            .arg(dir)
            .arg("probe")
            .arg("--out")
            .arg(&file)
            .env(NVRTC_ENV, t)
            .stderr_limit(1 << 20);
        if let Some(p) = profile {
            job = job.arg("--profile").arg(p);
        }
        let o = job.run().map_err(|e| format!("{} {e}", exe.shown()))?;
        let stderr = String::from_utf8_lossy(&o.stderr.bytes).into_owned();
        let toolchain = t.clone();
        let said = last_line(&stderr);
        let outcome = match o.status {
            Some(s) if s.success() => RunResults::load(&file).map_err(NotMeasured::Results),
            Some(_) if driver_refused(&stderr) => {
                Err(NotMeasured::DriverRefused { toolchain, said })
            }
            Some(status) => Err(NotMeasured::Failed {
                toolchain,
                status,
                said,
            }),
            None => Err(NotMeasured::TimedOut {
                toolchain,
                limit_s: probe_limit().as_secs(),
                said,
            }),
        };
        if let Err(e) = &outcome {
            warn!("accprobe: {e}");
        }
        runs.push(Measured {
            toolchain: t.clone(),
            outcome,
        });
    }
    let first = runs
        .iter()
        .find_map(|r| r.outcome.as_ref().ok())
        .ok_or("no toolchain could be measured")?;
    let p = find_profile(dir, profile.unwrap_or(&first.profile))?;
    let text = compare(&p, &runs);
    let md = out.join("toolchains.md");
    write_atomic(&md, &text).map_err(|e| format!("cannot write {}: {e}", md.shown()))?;
    say!("{text}\ncomparison: {}", md.shown());
    Ok(())
}

fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// `cargo xtask toolchains --compare A.json B.json`: the comparison from results files.
pub fn compare_files(dir: &Path, profile: Option<&str>, files: &[PathBuf]) -> crate::Done {
    let mut runs = Vec::new();
    for f in files {
        let r = RunResults::load(f).map_err(|e| e.to_string())?;
        let label = r.environment.as_ref().map_or_else(
            || f.display().to_string(),
            |e| {
                e.nvrtc_origin
                    .clone()
                    .unwrap_or_else(|| e.nvrtc_version.clone())
            },
        );
        runs.push(Measured {
            toolchain: label,
            outcome: Ok(r),
        });
    }
    let first = runs
        .first()
        .and_then(|r| r.outcome.as_ref().ok())
        .ok_or("name at least one results file")?;
    let p = find_profile(dir, profile.unwrap_or(&first.profile))?;
    say!("{}", compare(&p, &runs));
    Ok(())
}

/// How a table names a verdict: `holds`, `fails`...
pub fn class(o: &Outcome) -> &'static str {
    match o {
        Outcome::Pass(_) => "holds",
        Outcome::Fail(_) => "fails",
        Outcome::KnownDeviation { .. } => "fails (known deviation)",
        Outcome::Skipped(_) => "skipped",
        Outcome::Error(_) => "not judged (GPU busy)",
    }
}

/// The side-by-side Markdown: which toolchains ran, each variant's progress per toolchain,
/// the loop bodies that changed between consecutive toolchains, and the cases that flip.
pub fn compare(profile: &Profile, runs: &[Measured]) -> String {
    let mut s = which_ran(profile, runs);
    let ok: Vec<(&str, &RunResults)> = runs
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok().map(|x| (r.toolchain.as_str(), x)))
        .collect();
    if ok.is_empty() {
        return s;
    }
    let variants = profile.probe.variants();
    s.push_str(&progress(&variants, &ok));
    s.push_str(&sass_changes(&variants, &ok));
    s.push_str(&schedule::changes(&variants, &ok));
    s.push_str(&flips(profile, &ok));
    s
}

/// The comparison's head and its first section: which toolchains ran, and how.
fn which_ran(profile: &Profile, runs: &[Measured]) -> String {
    let mut s = format!(
        "<!-- Generated by `cargo xtask toolchains`. -->\n# Toolchains side by side: profile {}\n\n## Which toolchains ran\n\n| NVRTC | on this GPU |\n| --- | --- |\n",
        markdown(&profile.name)
    );
    for r in runs {
        let what = match &r.outcome {
            Ok(res) => res.environment.as_ref().map_or("measured".into(), |e| {
                format!(
                    "measured: {}{}, {}",
                    e.fingerprint(),
                    e.nvrtc_origin
                        .as_ref()
                        .map(|o| format!(" ({o})"))
                        .unwrap_or_default(),
                    e.date
                )
            }),
            Err(e) => format!("not measured: {e} (its compile-only cases still run)"),
        };
        s.push_str(&format!(
            "| {} | {} |\n",
            markdown(&r.toolchain),
            markdown(&what)
        ));
    }
    s
}

/// The section on each variant's progress per toolchain.
fn progress(variants: &[Variant], ok: &[(&str, &RunResults)]) -> String {
    let mut s = String::new();
    s.push_str("\n## Progress per toolchain (median; change against the first)\n\n");
    s.push_str(&header("variant", ok, " ---: |"));
    for v in variants {
        s.push_str(&format!("| {v} |"));
        let base = ok[0].1.get(*v).map(|r| r.baseline_progress());
        for (i, (_, r)) in ok.iter().enumerate() {
            match (r.get(*v).map(|x| x.baseline_progress()), base) {
                (Some(p), Some(b)) if i > 0 => {
                    s.push_str(&format!(" {p:.1} ({:+.2}%) |", (p / b - 1.0) * 100.0))
                }
                (Some(p), _) => s.push_str(&format!(" {p:.1} |")),
                (None, _) => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    s
}

/// The section on the loop bodies that changed between consecutive toolchains.
fn sass_changes(variants: &[Variant], ok: &[(&str, &RunResults)]) -> String {
    let mut s = String::new();
    s.push_str("\n## SASS that changed between toolchains (loop body)\n\n");
    let mut changed = 0;
    for w in ok.windows(2) {
        let ((ta, a), (tb, b)) = (w[0], w[1]);
        let (ta, tb) = (markdown(ta), markdown(tb));
        for v in variants {
            let (Some(x), Some(y)) = (
                a.get(*v).and_then(|r| r.sass.as_ref()),
                b.get(*v).and_then(|r| r.sass.as_ref()),
            ) else {
                continue;
            };
            if x.digest == y.digest {
                continue;
            }
            changed += 1;
            let old = x.loop_body.join("\n") + "\n";
            let new = y.loop_body.join("\n") + "\n";
            if old == new {
                s.push_str(&format!(
                    "- {v}, {ta} -> {tb}: the loop body is the same; the change is outside it\n"
                ));
            } else {
                let diff = similar::TextDiff::from_lines(&old, &new)
                    .unified_diff()
                    .header(&format!("{v} NVRTC {ta}"), &format!("{v} NVRTC {tb}"))
                    .to_string();
                // The SASS lines come from the files: sanitised, and fenced by more
                // backticks than any run in them, so that none closes the block.
                let diff = text::clean(&diff);
                let fence = "`".repeat(3.max(longest_backticks(&diff) + 1));
                s.push_str(&format!(
                    "- {v}, {ta} -> {tb}:\n\n{fence}diff\n{diff}{fence}\n"
                ));
            }
        }
    }
    if changed == 0 {
        s.push_str("No SASS digest differs between consecutive toolchains.\n");
    }
    s
}

/// The section on the cases that end otherwise under another toolchain.
fn flips(profile: &Profile, ok: &[(&str, &RunResults)]) -> String {
    let mut s = String::new();
    s.push_str("\n## Cases that flip between toolchains\n\n");
    // Flips are of the cases themselves: known deviations are left out of the judgement.
    let mut raw = profile.clone();
    raw.known_deviations.clear();
    let mut flips = Vec::new();
    for case in cases(profile) {
        if case.name == "baselines::environment" {
            continue;
        }
        let outcomes: Vec<&str> = ok
            .iter()
            .map(|(_, r)| class(&verdict::evaluate(&case, &raw, r)))
            .collect();
        if outcomes.iter().any(|o| *o != outcomes[0]) {
            flips.push(format!(
                "| {} | {} |",
                text::markdown_code(&case.name),
                outcomes.join(" | ")
            ));
        }
    }
    if flips.is_empty() {
        s.push_str("None: every case ends the same under every toolchain.\n");
    } else {
        s.push_str(&header("case", ok, " --- |"));
        s.push_str(&flips.join("\n"));
        s.push('\n');
    }
    s
}

/// The head of a table with a column per toolchain that ran: `first`, then each
/// toolchain's name, and the separator row with `align` (` --- |` or ` ---: |`) per
/// toolchain.
fn header(first: &str, ok: &[(&str, &RunResults)], align: &str) -> String {
    let mut s = format!("| {first} |");
    for (t, _) in ok {
        s.push_str(&format!(" {} |", markdown(t)));
    }
    s.push_str("\n| --- |");
    s.push_str(&align.repeat(ok.len()));
    s.push('\n');
    s
}

/// The longest run of backticks in `s`.
fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{compare, driver_refused, file_stem, Measured, NotMeasured};
    use crate::paths::find_profile;
    use crate::testing::{committed, expectations};

    #[test]
    fn a_folder_toolchain_names_one_file_not_a_tree() {
        assert_eq!(file_stem("12.8"), "12.8");
        assert_eq!(file_stem("/usr/local/cuda/lib64"), "usr_local_cuda_lib64");
        assert_eq!(file_stem("../x y"), ".._x_y");
        assert_eq!(file_stem("/"), "_");
    }

    #[test]
    fn toolchains_compare_shows_progress_sass_changes_flips_and_refused_toolchains() {
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
                    outcome: Err(NotMeasured::DriverRefused {
                        toolchain: "13.5".into(),
                        said: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION".into(),
                    }),
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
        // The committed run predates the schedule: the loops are not compared, and said so.
        assert!(
            md.contains("loops not compared: a run carries no schedule"),
            "{md}"
        );
    }

    #[test]
    fn toolchains_compare_names_a_loop_scheduled_otherwise_with_the_same_instructions() {
        let p = find_profile(&expectations(), "h200").unwrap();
        let mut a = accprobe::model::results::RunResults::load(&committed()).unwrap();
        for v in a.variants.iter_mut() {
            let s = v.sass.as_mut().unwrap();
            s.loop_control = vec!["B------:R-:W-:-:S01".to_string(); s.loop_body.len()];
            s.schedule_digest = Some("1".repeat(64));
        }
        let mut b = a.clone();
        let v = b
            .variants
            .iter_mut()
            .find(|v| v.name == "chain7_acc1_effective1")
            .unwrap();
        let s = v.sass.as_mut().unwrap();
        s.loop_control[0] = "B------:R-:W-:Y:S07".into();
        s.schedule_digest = Some("2".repeat(64));
        let (first, n) = (s.loop_body[0].clone(), s.loop_body.len());
        let md = compare(
            &p,
            &[
                Measured {
                    toolchain: "12.4".into(),
                    outcome: Ok(a),
                },
                Measured {
                    toolchain: "13.0".into(),
                    outcome: Ok(b),
                },
            ],
        );
        assert!(
            md.contains(&format!(
                "- chain7_acc1_effective1, 12.4 -> 13.0: same instructions, different schedule: `{first}` stall 1 → 7, no yield → yield; loop total stall {n} → {} cycles",
                n + 6
            )),
            "{md}"
        );
        assert!(!md.contains("loops not compared"), "{md}");
    }
}
