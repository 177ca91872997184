//! A profile's known deviations: read from the file (each with a measured reason, each
//! case once), and checked against the names of the cases the profile generates.

use super::file::DeviationFile;
use super::{KnownDeviation, Profile};
use crate::error::{Error, Result};
use crate::expectations::yaml::at;
use std::collections::BTreeMap;
use std::path::Path;

/// The known deviations of `list`, by case name.
pub(super) fn read(
    file: &Path,
    list: &[DeviationFile],
) -> Result<BTreeMap<String, KnownDeviation>> {
    let mut known_deviations = BTreeMap::new();
    for d in list {
        if d.reason.value.trim().is_empty() {
            return Err(at(
                file,
                &d.reason,
                "known deviation without a reason: give the measured numbers",
            ));
        }
        let deviation = KnownDeviation {
            reason: d.reason.value.clone(),
            unsteady: d.unsteady,
            line: d.case.referenced.line(),
            column: d.case.referenced.column(),
        };
        if known_deviations
            .insert(d.case.value.clone(), deviation)
            .is_some()
        {
            return Err(at(
                file,
                &d.case,
                format!(
                    "case {:?} is listed twice as a known deviation",
                    d.case.value
                ),
            ));
        }
    }
    Ok(known_deviations)
}

impl Profile {
    /// Refuses a known deviation that names no case of `cases`, the names of every case
    /// this profile generates (the verdict stage's, which the caller gives), at the
    /// deviation's line and column, with an example of a case name.
    pub fn check_known_deviations(&self, cases: &[String]) -> Result<()> {
        for (case, d) in &self.known_deviations {
            if !cases.contains(case) {
                let example = cases
                    .iter()
                    .find(|n| n.starts_with("invariant::"))
                    .or(cases.first())
                    .cloned()
                    .unwrap_or_default();
                return Err(Error::at(
                    &self.file,
                    d.line,
                    d.column,
                    format!(
                        "known deviation names case {case:?}, which this profile does not generate (cases look like {example:?})"
                    ),
                ));
            }
        }
        Ok(())
    }
}
