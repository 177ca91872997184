//! Blessing: turning a reviewed results file into the generated baselines file of a
//! profile (`expectations/baselines/<profile>.yaml`), with a readable diff of what changes.
//!
//! Architecture invariant: the hand-written profile is never rewritten; only the generated
//! baselines file is, atomically, never under `CI`, never through a link out of the
//! profile's folder, and under a lock on that folder that makes two blesses take turns:
//! the second writes nothing over a change it did not see ([`write_generated`]).

use crate::error::Result;
use crate::expectations::baselines::{self, BaselineOrigin, Baselines, PickBaseline, SassBaseline};
use crate::expectations::policy_source::PolicySource;
use crate::expectations::profile::Profile;
use crate::model::gpu::Environment;
use crate::model::results::{RunResults, SassSummary, VariantResult};
use crate::model::variant::Variant;
use crate::output::write_generated;
use crate::text::Shown;
use crate::verdict;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod diff;
mod error;

pub use error::BlessError;

/// What blessing would write, and how it differs from what is there.
#[derive(Debug, Clone, PartialEq)]
pub struct Blessing {
    pub(crate) file: PathBuf,
    pub contents: String,
    /// One line per changed, added or removed variant; empty when nothing changes.
    pub diff: Vec<String>,
    /// The profile's folder, which `file` must really be in when it is written.
    pub(crate) folder: PathBuf,
    /// The [`baselines::content_digest`] of `file` as the diff saw it (`None`: absent).
    pub(crate) before: Option<String>,
}

/// Why `results` may not become baselines of `profile`, if anything.
///
/// Refused whatever `allow_invalid` says, because the file written would not describe this
/// profile on this GPU: results without an environment or launch settings; another GPU
/// (by name when the profile lists `gpu_names`: an H100 has the H200's compute capability
/// 9.0, so capability alone is not enough then); another profile; other launch settings
/// ([`verdict::comparable`]); another mode than the profile's `probe.mode`; a variant
/// missing, or whose baseline figure would be zero or not finite (the generated file
/// would then not load).
///
/// About the mode: `ACCPROBE_MODE` may measure a profile serially or as a wave, and every
/// verdict judges either against the same baselines; but the baselines, and the
/// tolerances the profile reasons from them, are those of the mode its probe section
/// names. A wave run is therefore judged against serial baselines and never becomes them:
/// to bless from another mode, change `probe.mode` in the profile (a reviewed edit) first.
///
/// Refused unless `allow_invalid`: runs that failed their validity checks (output
/// problems, no samples, no register report, spills in the ptxas report or local-memory
/// instructions in the SASS).
pub fn check(
    profile: &Profile,
    results: &RunResults,
    allow_invalid: bool,
) -> std::result::Result<(), BlessError> {
    let env = results.environment.as_ref().ok_or(BlessError::Unmeasured)?;
    let mut wrong = not_this_profile(profile, results, env);
    let mut invalid = Vec::new();
    // A run older than contexts blesses what it measured; the contexts' variants stay
    // without baselines (their probe cases fail, asking for a bless) until a run holds them.
    for v in profile
        .probe
        .variants()
        .into_iter()
        .filter(|v| !results.predates(*v))
    {
        match results.get(v) {
            None => wrong.push(format!("{v}: not in the results")),
            Some(r) => {
                let base = r.baseline_progress();
                if !(base.is_finite() && blessed_figure(base) > 0.0) {
                    wrong.push(format!(
                        "{v}: progress {base} would be written as baseline {}: the probe loop did not run",
                        blessed_figure(base)
                    ));
                }
                invalid.extend(invalid_measurement(v, r));
            }
        }
    }
    if !wrong.is_empty() {
        return Err(BlessError::NotThisProfile {
            profile: profile.name.clone(),
            reasons: wrong,
        });
    }
    if !invalid.is_empty() && !allow_invalid {
        return Err(BlessError::Invalid { reasons: invalid });
    }
    Ok(())
}

/// Why `results` do not describe `profile` on this GPU (`env`'s): another GPU, profile,
/// launch settings or mode.
fn not_this_profile(profile: &Profile, results: &RunResults, env: &Environment) -> Vec<String> {
    let mut wrong = Vec::new();
    let m = &profile.matches;
    let gpu = env.identity();
    if !m.gpu_names.is_empty() {
        if !m.by_name(&gpu) {
            wrong.push(format!(
                "the results come from {:?} (compute capability {}), which profile {:?} does not match: not one of its GPUs {:?} (the compute capability alone is not enough when the profile names its GPUs)",
                env.gpu_name, env.compute_capability.shown(), profile.name, m.gpu_names
            ));
        }
    } else if !m.matches(&gpu) {
        wrong.push(format!(
            "the results come from {:?} (compute capability {}), which profile {:?} does not match: {m}",
            env.gpu_name, env.compute_capability.shown(), profile.name
        ));
    }
    if results.profile != profile.name {
        wrong.push(format!(
            "the results were measured under profile {:?}, not {:?}",
            results.profile, profile.name
        ));
    }
    if results.settings.is_none() {
        wrong.push(
            "the results record no launch settings (an old schema): re-measure to bless".into(),
        );
    }
    if let Err(e) = verdict::comparable(profile, results) {
        wrong.push(e.to_string());
    }
    if results.mode != profile.probe.mode {
        wrong.push(format!(
            "the results were measured in {:?} mode, profile {:?} measures in {:?} mode: its baselines are that mode's (change probe.mode in the profile first to bless another)",
            results.mode, profile.name, profile.probe.mode
        ));
    }
    wrong
}

/// Why `v`'s measurement `r` failed its validity checks: no samples, output problems, no
/// register report, spills (in a base-context variant).
fn invalid_measurement(v: Variant, r: &VariantResult) -> Vec<String> {
    let mut invalid = Vec::new();
    if r.samples.is_empty() {
        invalid.push(format!("{v}: no samples"));
    }
    invalid.extend(r.output_problems.iter().map(|p| format!("{v}: {p}")));
    // A spill outside the base context is what that context measures: its
    // baseline is blessed with it.
    match r.resources {
        None => invalid.push(format!("{v}: no register/spill report")),
        Some(res) if v.is_base() => {
            invalid.extend(res.spill_report().map(|s| format!("{v}: spills: {s}")))
        }
        Some(_) => {}
    }
    if let Some(sass) = r.sass.as_ref().filter(|_| v.is_base()) {
        let in_loop: Vec<&String> = sass
            .loop_body
            .iter()
            .filter(|i| is_local_memory(i))
            .collect();
        if !sass.local_memory_instructions.is_empty() || !in_loop.is_empty() {
            invalid.push(format!(
                "{v}: spills: local-memory instructions in the SASS: {}",
                sass.local_memory_instructions
                    .iter()
                    .chain(in_loop)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    invalid
}

/// A progress figure as the baselines file holds it (to 0.1), which the verdicts compare
/// with.
pub(crate) fn blessed_figure(progress: f64) -> f64 {
    (progress * 10.0).round() / 10.0
}

/// The baseline progress of every variant of `profile` that `results` measured, as a bless
/// writes it into the baselines file (to 0.1).
pub(crate) fn blessed_progress(profile: &Profile, results: &RunResults) -> BTreeMap<String, f64> {
    profile
        .probe
        .variants()
        .into_iter()
        .filter_map(|v| {
            Some((
                v.name(),
                blessed_figure(results.get(v)?.baseline_progress()),
            ))
        })
        .collect()
}

/// Whether a SASS line is a local-memory load or store (`LDL`, `STL`, any width or predicate).
fn is_local_memory(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let mut op = words.next().unwrap_or("");
    if op.starts_with('@') {
        op = words.next().unwrap_or("");
    }
    matches!(op.split('.').next(), Some("LDL" | "STL"))
}

/// The baselines file for `profile` from `results`, and its diff against `current`, with
/// a policy file's picks (computed here; none where [`policy_picks`] refuses them, which
/// then fails every picks case asking for a bless). A profile whose policy is a program
/// gets its picks through [`prepare_with`] and [`policy_picks`], which run it: what
/// `cargo xtask bless` does for every profile.
pub fn prepare(
    profile: &Profile,
    results: &RunResults,
    results_label: &str,
    command: &str,
    file: &Path,
    current: Option<&Baselines>,
) -> Blessing {
    let picks = match &profile.policy_gate {
        Some(g) if matches!(g.source, PolicySource::File(_)) => {
            policy_picks(profile, results).unwrap_or_default()
        }
        _ => BTreeMap::new(),
    };
    let input = Bless {
        profile,
        results,
        results_label,
        command,
        file,
        current,
    };
    prepare_with(&input, &picks)
}

/// The gated policy's pick in every context, with the progress `results` measured for it:
/// what a bless records. Asks the policy (a program runs once); refused when it gives no
/// picks or picks a K the results do not hold.
pub fn policy_picks(
    profile: &Profile,
    results: &RunResults,
) -> std::result::Result<BTreeMap<String, PickBaseline>, BlessError> {
    let Some(picks) = crate::policy_gate::ask(profile, Some(results)) else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for c in verdict::cases::policy_contexts(profile, Some(results)) {
        let k = picks.of(&c.name).map_err(|source| BlessError::NoPick {
            policy: picks.policy.clone(),
            context: c.name.clone(),
            source,
        })?;
        let found = verdict::at_place(results, &c.place);
        let st = verdict::standing(k, &found).map_err(|_| BlessError::PickNotMeasured {
            policy: picks.policy.clone(),
            context: c.name.clone(),
            k,
        })?;
        out.insert(
            c.name,
            PickBaseline {
                accumulators: k,
                progress: blessed_figure(st.progress),
            },
        );
    }
    Ok(out)
}

/// What a bless is asked for: the baselines of `profile` from `results`, written to `file`
/// over `current`.
#[derive(Debug, Clone, Copy)]
pub struct Bless<'a> {
    pub profile: &'a Profile,
    pub results: &'a RunResults,
    /// The results file, as the baselines' origin names it.
    pub results_label: &'a str,
    /// The command that regenerates the file, as its header says.
    pub command: &'a str,
    pub file: &'a Path,
    /// The baselines there now, if any.
    pub current: Option<&'a Baselines>,
}

/// [`prepare`] with the policy's picks given (from [`policy_picks`]).
pub fn prepare_with(input: &Bless, picks: &BTreeMap<String, PickBaseline>) -> Blessing {
    let Bless {
        profile,
        results,
        file,
        current,
        ..
    } = *input;
    let env = results
        .environment
        .clone()
        .unwrap_or_else(|| panic!("check() first: results have no environment"));
    let origin = BaselineOrigin {
        results: input.results_label.to_string(),
        gpu_name: env.gpu_name.clone(),
        driver_version: env.driver_version.clone(),
        nvrtc_version: env.nvrtc_version.clone(),
        date: env.date.clone(),
        compile_options: env.compile_options.clone(),
    };
    let new = blessed_progress(profile, results);
    let with_sass: Vec<(Variant, &SassSummary)> = profile
        .probe
        .variants()
        .into_iter()
        .filter_map(|v| Some((v, results.get(v)?.sass.as_ref()?)))
        .collect();
    let new_sass: BTreeMap<String, SassBaseline> = with_sass
        .iter()
        .map(|(v, x)| {
            let blessed = SassBaseline {
                digest: x.digest.clone(),
                loop_body: x.loop_body.clone(),
                schedule_digest: x.schedule_digest.clone(),
                loop_control: x.loop_control.clone(),
            };
            (v.name(), blessed)
        })
        .collect();
    let header = header(profile, input.command);
    let contents = baselines::render(&header, &profile.name, &origin, &new, &new_sass, picks);
    let mut diff = diff::progress(profile, current, &new);
    diff.extend(diff::sass(current, &with_sass));
    diff.extend(diff::picks(current, picks));
    // The file as the diff saw it: as the profile read it when `current` is that file,
    // else as it is now.
    let before = match current {
        Some(b) if b.file == file => b.read.clone(),
        _ => current_digest(file),
    };
    Blessing {
        file: file.to_path_buf(),
        contents,
        diff,
        folder: profile_folder(profile),
        before,
    }
}

/// The generated file's header: what made it, and where its tolerance lives.
fn header(profile: &Profile, command: &str) -> [String; 4] {
    let profile_file = profile.file.file_name().map_or_else(
        || profile.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    [
        format!("Generated by `{command}`."),
        "Do not edit by hand: re-bless from a reviewed results file. The tolerance lives in the"
            .into(),
        format!("hand-written profile, expectations/{profile_file}."),
        "progress: median progress over warps and repeats (the mean where a run kept no samples)."
            .into(),
    ]
}

/// The folder of `profile`'s file, which every file it names (and bless writes) is in.
pub(crate) fn profile_folder(profile: &Profile) -> PathBuf {
    match profile.file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The [`baselines::content_digest`] of `file` now; `None` when it cannot be read (absent).
fn current_digest(file: &Path) -> Option<String> {
    crate::input::read_bytes(file, "baselines", crate::input::YAML_LIMIT)
        .ok()
        .map(|b| baselines::content_digest(&b))
}

impl Blessing {
    /// Whether the file already holds exactly these contents (then nothing is written).
    pub fn unchanged(&self) -> bool {
        crate::input::confined(&self.folder, &self.file).is_ok()
            && crate::input::read_bytes(&self.file, "baselines", crate::input::YAML_LIMIT)
                .is_ok_and(|b| b == self.contents.as_bytes())
    }

    /// Writes the file as [`write_generated`] says: under the profile folder's lock, never
    /// over a change made since the diff, never under CI, never outside the profile's
    /// folder. Writes nothing when the file already holds these contents, so an unchanged
    /// blessing leaves the file (and its time) as is.
    pub fn write(&self) -> Result<()> {
        write_generated(
            &self.folder,
            &self.file,
            self.before.as_deref(),
            &self.contents,
            "baselines",
        )
    }
}
