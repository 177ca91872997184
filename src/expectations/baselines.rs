//! The generated baselines file (`expectations/baselines/<profile>.yaml`): its one owner.
//! It is read here for the verdicts and written here for `bless`, from the same types, so
//! the format is defined once.

use crate::error::Result;
use crate::expectations::policy::MAX_POLICY_ACCUMULATORS;
use crate::expectations::yaml::number::{self, Unquoted};
use crate::expectations::yaml::{at, parse_yaml, read_text};
use crate::model::variant::Variant;
use crate::text::Shown;
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A profile's baselines: the generated figures and the hand-written tolerances.
#[derive(Debug, Clone, PartialEq)]
pub struct Baselines {
    /// Allowed relative distance from the baseline, in either direction.
    pub tolerance: f64,
    /// The generated file they came from.
    pub file: PathBuf,
    pub progress: BTreeMap<String, f64>,
    /// Per variant: the SASS digest and loop body it was blessed with.
    pub sass: BTreeMap<String, SassBaseline>,
    /// Variants with a wider tolerance than `tolerance`, each with the measured reason.
    pub wider: BTreeMap<String, Wider>,
    /// Per policy context (`chain13`): the K the gated policy picked when blessed.
    pub policy_picks: BTreeMap<String, PickBaseline>,
    /// Where the baselines were measured (`None` until a file is blessed).
    pub origin: Option<BaselineOrigin>,
    /// The [`content_digest`] of the file as it was read (`None`: it did not exist), so
    /// that `bless` can tell whether it changed since its diff was made.
    pub(crate) read: Option<String>,
}

impl Baselines {
    /// The tolerance variant `name` is judged with: its wider one, else the profile's.
    pub fn tolerance_of(&self, name: &str) -> f64 {
        self.wider.get(name).map_or(self.tolerance, |w| w.tolerance)
    }
}

/// The SHA-256 of a generated file's bytes, in hex: what `bless` compares to know whether
/// the file changed since it was read.
pub(crate) fn content_digest(bytes: &[u8]) -> String {
    crate::digest::sha256_hex(bytes)
}

/// A wider baseline tolerance for one variant, and why (measured numbers).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wider {
    #[serde(deserialize_with = "number::plain")]
    pub tolerance: f64,
    pub reason: String,
}

/// A variant's blessed SASS fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SassBaseline {
    pub digest: String,
    pub loop_body: Vec<String>,
    /// The loop's schedule digest and control fields (`model::results::SassSummary`'s);
    /// absent in files blessed before the schedule was decoded, or where it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loop_control: Vec<String>,
}

/// The gated policy's pick in one context, as blessed: K, and the progress measured for it
/// then (for the reviewer; a verdict compares picks on the run it judges).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PickBaseline {
    #[serde(deserialize_with = "number::plain")]
    pub accumulators: u32,
    #[serde(deserialize_with = "number::plain")]
    pub progress: f64,
}

/// The generated baselines file (`expectations/baselines/<profile>.yaml`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselinesFile {
    profile: Spanned<String>,
    measured: BaselineOrigin,
    progress: HashMap<Spanned<String>, Spanned<Unquoted<f64>>>,
    #[serde(default)]
    sass: HashMap<Spanned<String>, SassBaseline>,
    #[serde(default)]
    policy_picks: HashMap<Spanned<String>, Spanned<PickBaseline>>,
}

/// Where a baseline was measured; kept in the generated file for reviewers.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineOrigin {
    pub(crate) results: String,
    pub(crate) gpu_name: String,
    pub driver_version: String,
    pub(crate) nvrtc_version: String,
    pub(crate) date: String,
    /// The NVRTC options the blessed kernels were compiled with, so that a red case's
    /// first suspect can name an option added or removed since. Empty in files blessed
    /// before they were recorded, which keep loading (the options are then not compared;
    /// every compile has options, its architecture at least, so empty means unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compile_options: Vec<String>,
}

/// What `bless` writes: the same fields as [`BaselinesFile`], in a stable order.
#[derive(Serialize)]
struct BaselinesDoc<'a> {
    profile: &'a str,
    measured: &'a BaselineOrigin,
    progress: &'a BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    sass: &'a BTreeMap<String, SassBaseline>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    policy_picks: &'a BTreeMap<String, PickBaseline>,
}

/// The text of a baselines file: a header saying what generated it, then the data.
/// `progress` holds median progress rounded to 0.1.
pub(crate) fn render(
    header: &[String],
    profile: &str,
    measured: &BaselineOrigin,
    progress: &BTreeMap<String, f64>,
    sass: &BTreeMap<String, SassBaseline>,
    policy_picks: &BTreeMap<String, PickBaseline>,
) -> String {
    let doc = BaselinesDoc {
        profile,
        measured,
        progress,
        sass,
        policy_picks,
    };
    with_header(
        header,
        &serde_saphyr::to_string(&doc).expect("baselines serialise"),
    )
}

/// A generated file's text: the header as comments, then the body, ending in a newline.
fn with_header(header: &[String], body: &str) -> String {
    // Each line on one line (a path or command from outside may hold a newline, which would
    // end the comment and put its rest into the YAML).
    let mut text: String = header
        .iter()
        .map(|l| format!("# {}\n", crate::text::line(l)))
        .collect();
    text.push_str(body);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Reads and checks the generated baselines file of profile `profile` (`profile_file`),
/// whose variants are `variants`.
pub(crate) fn load(
    path: &Path,
    profile: &str,
    profile_file: &Path,
    variants: &[Variant],
    tolerance: f64,
) -> Result<Baselines> {
    let text = read_text(path, "baselines")?;
    let raw: BaselinesFile = parse_yaml(&text, path)?;
    if raw.profile.value != profile {
        return Err(at(
            path,
            &raw.profile,
            format!(
                "baselines are for profile {:?}, but {} is profile {:?}",
                raw.profile.value,
                profile_file.shown(),
                profile
            ),
        ));
    }
    let known = |k: &Spanned<String>, what: &str| -> Result<()> {
        if variants.iter().any(|x| x.name() == k.value) {
            Ok(())
        } else {
            Err(at(
                path,
                k,
                format!(
                    "{what} for {:?}, which is not a variant of profile {:?}",
                    k.value, profile
                ),
            ))
        }
    };
    let mut progress = BTreeMap::new();
    for (k, v) in &raw.progress {
        known(k, "baseline")?;
        if !(v.value.0.is_finite() && v.value.0 > 0.0) {
            return Err(at(
                path,
                v,
                format!(
                    "baseline progress {} for {}: expected a positive number",
                    v.value.0, k.value
                ),
            ));
        }
        progress.insert(k.value.clone(), v.value.0);
    }
    let mut sass = BTreeMap::new();
    for (k, v) in &raw.sass {
        known(k, "SASS baseline")?;
        sass.insert(k.value.clone(), v.clone());
    }
    let policy_picks = policy_picks(path, &raw)?;
    Ok(Baselines {
        tolerance,
        file: path.to_path_buf(),
        progress,
        sass,
        policy_picks,
        wider: BTreeMap::new(),
        origin: Some(raw.measured),
        read: Some(content_digest(text.as_bytes())),
    })
}

/// The policy's blessed picks of `raw`, each K in range with a positive progress.
fn policy_picks(path: &Path, raw: &BaselinesFile) -> Result<BTreeMap<String, PickBaseline>> {
    let mut policy_picks = BTreeMap::new();
    for (k, v) in &raw.policy_picks {
        let b = v.value;
        let k_ok = (1..=MAX_POLICY_ACCUMULATORS).contains(&b.accumulators);
        if !(k_ok && b.progress.is_finite() && b.progress > 0.0) {
            return Err(at(
                path,
                v,
                format!(
                    "policy pick for {}: expected accumulators from 1 to {MAX_POLICY_ACCUMULATORS} and a positive progress",
                    k.value
                ),
            ));
        }
        policy_picks.insert(k.value.clone(), b);
    }
    Ok(policy_picks)
}

// ---------------------------------------------------------------------------------------
// Compile-only baselines (`expectations/baselines/<profile>-compile.yaml`): the blessed SASS
// digest of each variant per (architecture, toolchain), from the compile-only gate.

/// The first hex digits of a SASS digest that compile-only baselines keep.
pub(crate) const COMPILE_DIGEST_CHARS: usize = 16;

/// Architecture -> toolchain (`12.8`) -> variant -> digest prefix.
pub(crate) type Digests = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// A profile's compile-only baselines.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileBaselines {
    /// The generated file they came from.
    pub(crate) file: PathBuf,
    /// How they were compiled (`None` until a file is blessed).
    pub(crate) origin: Option<CompileOrigin>,
    /// Architecture -> toolchain (`12.8`) -> variant -> digest prefix.
    pub(crate) digests: Digests,
    /// The same for each loop's schedule digest (`SassSummary::schedule_digest`), where
    /// it was decoded; empty in files blessed before it was.
    pub schedules: Digests,
    /// The [`content_digest`] of the file as it was read (`None`: it did not exist).
    pub(crate) read: Option<String>,
}

impl CompileBaselines {
    /// No baselines yet, to be blessed into `file`.
    pub(crate) fn empty(file: PathBuf) -> CompileBaselines {
        CompileBaselines {
            file,
            origin: None,
            digests: BTreeMap::new(),
            schedules: BTreeMap::new(),
            read: None,
        }
    }

    /// The blessed loop-schedule digest prefix of `variant` for (`arch`, `toolchain`).
    pub(crate) fn schedule(&self, arch: &str, toolchain: &str, variant: &str) -> Option<&str> {
        self.schedules
            .get(arch)?
            .get(toolchain)?
            .get(variant)
            .map(String::as_str)
    }

    /// The blessed digest prefix of `variant` for (`arch`, `toolchain`).
    pub(crate) fn digest(&self, arch: &str, toolchain: &str, variant: &str) -> Option<&str> {
        self.digests
            .get(arch)?
            .get(toolchain)?
            .get(variant)
            .map(String::as_str)
    }
}

/// How compile-only baselines were made; kept in the generated file for reviewers.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompileOrigin {
    pub(crate) date: String,
    /// The disassembler and its version (`nvdisasm 13.2.51`): the digests are of its text.
    pub(crate) disassembler: String,
    /// Toolchain (`12.8`) -> what it was (`NVRTC 12.8 (nvidia-cuda-nvrtc-cu12==12.8.93)`).
    pub(crate) toolchains: BTreeMap<String, String>,
}

/// Architecture -> toolchain -> variant -> digest, with positions.
type SpannedDigests =
    HashMap<Spanned<String>, HashMap<Spanned<String>, HashMap<Spanned<String>, Spanned<String>>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompileBaselinesFile {
    profile: Spanned<String>,
    compiled: CompileOrigin,
    digests: SpannedDigests,
    #[serde(default)]
    schedules: SpannedDigests,
}

#[derive(Serialize)]
struct CompileBaselinesDoc<'a> {
    profile: &'a str,
    compiled: &'a CompileOrigin,
    digests: &'a Digests,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    schedules: &'a Digests,
}

/// The text of a compile-only baselines file: the header, then the data.
pub(crate) fn render_compile(
    header: &[String],
    profile: &str,
    compiled: &CompileOrigin,
    digests: &Digests,
    schedules: &Digests,
) -> String {
    let doc = CompileBaselinesDoc {
        profile,
        compiled,
        digests,
        schedules,
    };
    with_header(
        header,
        &serde_saphyr::to_string(&doc).expect("compile baselines serialise"),
    )
}

/// Reads and checks the compile-only baselines of profile `profile` (`profile_file`).
pub(crate) fn load_compile(
    path: &Path,
    profile: &str,
    profile_file: &Path,
    variants: &[Variant],
    architectures: &[String],
    toolchains: &[String],
) -> Result<CompileBaselines> {
    let text = read_text(path, "compile baselines")?;
    let raw: CompileBaselinesFile = parse_yaml(&text, path)?;
    if raw.profile.value != profile {
        return Err(at(
            path,
            &raw.profile,
            format!(
                "compile baselines are for profile {:?}, but {} is profile {:?}",
                raw.profile.value,
                profile_file.shown(),
                profile
            ),
        ));
    }
    let known = Known {
        path,
        profile,
        profile_file,
        variants,
        architectures,
        toolchains,
    };
    Ok(CompileBaselines {
        file: path.to_path_buf(),
        origin: Some(raw.compiled),
        digests: known.digests(&raw.digests)?,
        schedules: known.digests(&raw.schedules)?,
        read: Some(content_digest(text.as_bytes())),
    })
}

/// What a compile-only baselines file may name: its profile's variants, architectures and
/// toolchains.
struct Known<'a> {
    path: &'a Path,
    profile: &'a str,
    profile_file: &'a Path,
    variants: &'a [Variant],
    architectures: &'a [String],
    toolchains: &'a [String],
}

impl Known<'_> {
    /// One map of digest prefixes, checked: known names, [`COMPILE_DIGEST_CHARS`] hex digits.
    fn digests(&self, raw: &SpannedDigests) -> Result<Digests> {
        let Known {
            path,
            profile,
            profile_file,
            variants,
            architectures,
            toolchains,
        } = *self;
        let mut digests = BTreeMap::new();
        for (arch, per_tc) in raw {
            if !architectures.contains(&arch.value) {
                return Err(at(
                    path,
                    arch,
                    format!(
                        "{:?} is not in compile_only.architectures {architectures:?} of {}",
                        arch.value,
                        profile_file.shown()
                    ),
                ));
            }
            let mut a = BTreeMap::new();
            for (tc, per_variant) in per_tc {
                if !toolchains.contains(&tc.value) {
                    return Err(at(
                        path,
                        tc,
                        format!(
                            "toolchain {:?} is not in compile_only.toolchains {toolchains:?} of {}",
                            tc.value,
                            profile_file.shown()
                        ),
                    ));
                }
                let mut t = BTreeMap::new();
                for (v, d) in per_variant {
                    if !variants.iter().any(|x| x.name() == v.value) {
                        return Err(at(
                            path,
                            v,
                            format!(
                                "digest for {:?}, which is not a variant of profile {profile:?}",
                                v.value
                            ),
                        ));
                    }
                    if d.value.len() != COMPILE_DIGEST_CHARS
                        || !d.value.bytes().all(|b| b.is_ascii_hexdigit())
                    {
                        return Err(at(
                            path,
                            d,
                            format!(
                                "digest {:?}: expected {COMPILE_DIGEST_CHARS} hex digits",
                                d.value
                            ),
                        ));
                    }
                    t.insert(v.value.clone(), d.value.to_ascii_lowercase());
                }
                a.insert(tc.value.clone(), t);
            }
            digests.insert(arch.value.clone(), a);
        }
        Ok(digests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_line_from_outside_stays_one_comment_line() {
        let header = ["Generated by `bless --from a\nprogress: {}`.".to_string()];
        let text = with_header(&header, "profile: p\n");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert!(
            lines[0].starts_with("# Generated by") && lines[0].contains("\\n"),
            "{text:?}"
        );
        assert_eq!(lines[1], "profile: p");
    }

    fn load(text: &str) -> Result<CompileBaselines> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p-compile.yaml");
        std::fs::write(&path, text).unwrap();
        load_compile(
            &path,
            "p",
            Path::new("p.yaml"),
            &[Variant::new(7, 1)],
            &["sm_90".to_string()],
            &["13.0".to_string()],
        )
    }

    const HEAD: &str = "profile: p\ncompiled:\n  date: \"2026-12-01T00:00:00Z\"\n  disassembler: nvdisasm 13.2.51\n  toolchains: {}\ndigests:\n  sm_90:\n    \"13.0\":\n      chain7_acc1_effective1: 0123456789abcdef\n";

    #[test]
    fn compile_baselines_without_schedules_load_and_schedules_are_checked() {
        let old = load(HEAD).unwrap();
        assert!(old.schedules.is_empty());
        assert_eq!(
            old.schedule("sm_90", "13.0", "chain7_acc1_effective1"),
            None
        );
        let new = load(&format!(
            "{HEAD}schedules:\n  sm_90:\n    \"13.0\":\n      chain7_acc1_effective1: fedcba9876543210\n"
        ))
        .unwrap();
        assert_eq!(
            new.schedule("sm_90", "13.0", "chain7_acc1_effective1"),
            Some("fedcba9876543210")
        );
        let bad = load(&format!(
            "{HEAD}schedules:\n  sm_90:\n    \"13.0\":\n      chain7_acc1_effective1: xyz\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            bad.contains(":13:") && bad.contains("expected 16 hex digits"),
            "{bad}"
        );
    }
}
