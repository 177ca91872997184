//! A profile's known deviations, read from the file: each with a measured reason, each
//! case once.

use super::file::DeviationFile;
use super::KnownDeviation;
use crate::error::Result;
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
