//! The generated baselines file (`expectations/baselines/<profile>.yaml`): its one owner.
//! It is read here for the verdicts and written here for `bless`, from the same types, so
//! the format is defined once.

use crate::error::Result;
use crate::expectations::yaml::number::{self, Unquoted};
use crate::expectations::yaml::{at, parse_yaml, read_text};
use crate::model::variant::Variant;
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
    /// Where the baselines were measured (`None` until a file is blessed).
    pub origin: Option<BaselineOrigin>,
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
}

/// Where a baseline was measured; kept in the generated file for reviewers.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineOrigin {
    pub results: String,
    pub gpu_name: String,
    pub driver_version: String,
    pub nvrtc_version: String,
    pub date: String,
}

/// What `bless` writes: the same fields as [`BaselinesFile`], in a stable order.
#[derive(Serialize)]
struct BaselinesDoc<'a> {
    profile: &'a str,
    measured: &'a BaselineOrigin,
    progress: &'a BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    sass: &'a BTreeMap<String, SassBaseline>,
}

/// The text of a baselines file: a header saying what generated it, then the data.
/// `progress` holds median progress rounded to 0.1.
pub fn render(
    header: &[String],
    profile: &str,
    measured: &BaselineOrigin,
    progress: &BTreeMap<String, f64>,
    sass: &BTreeMap<String, SassBaseline>,
) -> String {
    let doc = BaselinesDoc {
        profile,
        measured,
        progress,
        sass,
    };
    let body = serde_saphyr::to_string(&doc).expect("baselines serialise");
    let mut text: String = header.iter().map(|l| format!("# {l}\n")).collect();
    text.push_str(&body);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Reads and checks the generated baselines file of profile `profile` (`profile_file`),
/// whose variants are `variants`.
pub fn load(
    path: &Path,
    profile: &str,
    profile_file: &Path,
    variants: &[Variant],
    tolerance: f64,
) -> Result<Baselines> {
    let raw: BaselinesFile = parse_yaml(&read_text(path, "baselines")?, path)?;
    if raw.profile.value != profile {
        return Err(at(
            path,
            &raw.profile,
            format!(
                "baselines are for profile {:?}, but {} is profile {:?}",
                raw.profile.value,
                profile_file.display(),
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
    Ok(Baselines {
        tolerance,
        file: path.to_path_buf(),
        progress,
        sass,
        wider: BTreeMap::new(),
        origin: Some(raw.measured),
    })
}
