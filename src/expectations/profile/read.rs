//! Reading a profile: the file's format ([`super::file`]) into the checked [`Profile`].

use super::file::{BaselinesRef, InvariantFile, ProfileFile};
use super::probe::tolerance;
use super::{
    contexts, known_deviations, policy_gate, probe, reductions, Invariant, Profile, Validity,
};
use crate::error::{Error, Result};
use crate::expectations::baselines::{self, Baselines, Wider};
use crate::expectations::recorded;
use crate::expectations::yaml::{
    at, is_case_name, parse_document, path_inside, read_text, referenced_from, CASE_NAME,
};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use crate::text::Shown;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;
use std::path::Path;

impl Profile {
    /// Reads and checks a profile file, and the files it names. A symlink that cannot be
    /// followed is refused naming where it points.
    pub(crate) fn load(file: &Path) -> Result<Profile> {
        let is_link = std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink());
        if is_link {
            if let Err(e) = std::fs::metadata(file) {
                let to = std::fs::read_link(file).map_or_else(|_| "?".into(), |t| t.shown());
                return Err(Error::in_file(
                    file,
                    format!("cannot read profile: a symlink to {to} that cannot be followed ({e})"),
                ));
            }
        }
        let text = read_text(file, "profile")?;
        Profile::read(&text, file)
    }

    /// Reads a profile given as text, and the files it names (policy, baselines, recorded
    /// results); `file` names it in errors and anchors relative paths. Known deviations are
    /// not yet checked against the cases: [`Profile::check_known_deviations`] does that,
    /// given their names.
    pub(crate) fn read(text: &str, file: &Path) -> Result<Profile> {
        let raw: ProfileFile = parse_document(
            text,
            file,
            "profile",
            "a mapping with name, description, probe and invariants",
        )?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let name = raw.name.value.clone();
        if !is_case_name(&name) {
            return Err(at(
                file,
                &raw.name,
                format!("profile name {name:?}: {CASE_NAME}"),
            ));
        }
        let mut probe = probe::probe(file, &raw.probe, raw.sink_isolation.as_ref())?;
        if let Some(c) = &raw.contexts {
            contexts::contexts(file, c, &mut probe)?;
        }
        let mut reduction_invariants = Vec::new();
        if let Some(r) = &raw.reductions {
            reduction_invariants = reductions::reductions(file, r, &mut probe)?;
        }
        let invariants = invariants(file, &raw.invariants, &probe)?;
        let mut profile = Profile {
            name,
            description: raw.description,
            file: file.to_path_buf(),
            matches: raw.matches,
            probe,
            invariants,
            reduction_invariants,
            known_deviations: BTreeMap::new(),
            baselines: None,
            validity: None,
            policy_gate: None,
            recorded: None,
            compile_only: None,
        };
        if let Some(h) = &raw.policy_gate {
            let tolerance = tolerance(file, "policy_gate.tolerance", &h.value.tolerance)?;
            profile.policy_gate = Some(policy_gate::read(file, dir, h, tolerance)?);
        }
        if let Some(v) = &raw.validity {
            profile.validity = Some(validity(file, v)?);
        }
        if let Some(b) = &raw.baselines {
            let variants = profile.probe.variants();
            profile.baselines = Some(baselines(file, dir, b, &profile.name, &variants)?);
        }
        profile.known_deviations = known_deviations::read(file, &raw.known_deviations)?;
        if let Some(c) = &raw.compile_only {
            let variants = profile.probe.variants();
            profile.compile_only = Some(c.check(file, &profile.name, &variants)?);
        }
        if let Some(r) = &raw.recorded {
            profile.recorded = Some(recorded::load(file, dir, r, &profile.name, &profile.probe)?);
        }
        Ok(profile)
    }
}

/// The invariants, each accumulator count one of `probe`'s.
fn invariants(file: &Path, raw: &[InvariantFile], probe: &ProbeSettings) -> Result<Vec<Invariant>> {
    let known_k = |s: &Spanned<u32>, what: &str| -> Result<u32> {
        if probe.accumulators.contains(&s.value) {
            Ok(s.value)
        } else {
            Err(at(
                file,
                s,
                format!(
                    "{what}: accumulator count {} is not in probe.accumulators {:?}",
                    s.value, probe.accumulators
                ),
            ))
        }
    };
    let mut invariants = Vec::new();
    for inv in raw {
        invariants.push(match inv {
            InvariantFile::Peak {
                accumulators,
                tolerance: t,
            } => Invariant::Peak {
                accumulators: known_k(accumulators, "peak.accumulators")?,
                tolerance: tolerance(file, "peak.tolerance", t)?,
            },
            InvariantFile::GainGrows {
                accumulators,
                over,
                min_increase,
            } => {
                if probe.chains.len() < 2 {
                    return Err(at(
                        file,
                        accumulators,
                        "gain_grows needs at least two chain lengths in probe.chains",
                    ));
                }
                if !(min_increase.value.is_finite() && min_increase.value >= 0.0) {
                    return Err(at(
                        file,
                        min_increase,
                        "gain_grows.min_increase: expected a ratio step >= 0",
                    ));
                }
                Invariant::GainGrows {
                    accumulators: known_k(accumulators, "gain_grows.accumulators")?,
                    over: known_k(over, "gain_grows.over")?,
                    min_increase: min_increase.value,
                }
            }
            InvariantFile::NoSpills {} => Invariant::NoSpills,
        });
    }
    Ok(invariants)
}

/// The validity checks' settings, checked.
fn validity(file: &Path, v: &Spanned<Validity>) -> Result<Validity> {
    if v.value.ffma_latency_cycles == 0 || v.value.schedulers_per_sm == 0 {
        return Err(at(
            file,
            v,
            "validity: ffma_latency_cycles and schedulers_per_sm must be >= 1",
        ));
    }
    let t = &v.value.duration_tolerance;
    if !(t.is_finite() && *t > 0.0 && *t < 1.0) {
        return Err(at(
            file,
            v,
            format!("validity.duration_tolerance {t}: expected a fraction in (0, 1), e.g. 0.05"),
        ));
    }
    Ok(v.value)
}

/// The baselines the profile names, with its wider tolerances; empty where the file is
/// missing.
fn baselines(
    file: &Path,
    dir: &Path,
    b: &BaselinesRef,
    profile: &str,
    variants: &[Variant],
) -> Result<Baselines> {
    let tolerance = tolerance(file, "baselines.tolerance", &b.tolerance)?;
    let path = path_inside(file, dir, "baselines.file", &b.file)?;
    // A missing file is not a load error: every variant case then fails saying to
    // bless one, and `cargo xtask bless` can load the profile to write it.
    let wider = wider(file, b, variants, tolerance)?;
    let mut loaded = if path.exists() {
        baselines::load(&path, profile, file, variants, tolerance)
            .map_err(referenced_from(file, &b.file))?
    } else {
        Baselines {
            tolerance,
            file: path,
            progress: BTreeMap::new(),
            sass: BTreeMap::new(),
            wider: BTreeMap::new(),
            policy_picks: BTreeMap::new(),
            origin: None,
            read: None,
        }
    };
    loaded.wider = wider;
    Ok(loaded)
}

/// `baselines.wider`: each a variant of the profile, with a tolerance above the baselines'
/// and a reason.
fn wider(
    file: &Path,
    b: &BaselinesRef,
    variants: &[Variant],
    tolerance: f64,
) -> Result<BTreeMap<String, Wider>> {
    let mut wider = BTreeMap::new();
    for (name, w) in &b.wider {
        if !variants.iter().any(|v| &v.name() == name) {
            return Err(at(
                file,
                w,
                format!("baselines.wider names {name:?}, which is not a variant of this profile"),
            ));
        }
        let t = &w.value.tolerance;
        if !(t.is_finite() && *t > tolerance && *t < 1.0) {
            return Err(at(file, w, format!("baselines.wider.{name}.tolerance {t}: expected more than baselines.tolerance ({tolerance}) and less than 1")));
        }
        if w.value.reason.trim().is_empty() {
            return Err(at(
                file,
                w,
                format!("baselines.wider.{name}: give the measured reason"),
            ));
        }
        wider.insert(name.clone(), w.value.clone());
    }
    Ok(wider)
}
