//! A store read back as typed rows, for the readers (`cargo xtask history`).

use super::record::{typed, RunRecord};
use super::rows::{CaseRow, Run, VariantRow};
use super::schema::{CASES, RUNS, VARIANTS};
use super::store::{Store, StoreError};

/// Every run, in the order they measured (then recorded, then by id).
pub fn runs(s: &mut dyn Store) -> Result<Vec<Run>, StoreError> {
    let mut runs: Vec<Run> = typed(&s.select(&RUNS, None)?)?;
    runs.sort_by(|a, b| {
        let at = |r: &Run| {
            r.measured_at
                .clone()
                .unwrap_or_else(|| r.recorded_at.clone())
        };
        at(a)
            .cmp(&at(b))
            .then(a.recorded_at.cmp(&b.recorded_at))
            .then(a.id.cmp(&b.id))
    });
    Ok(runs)
}

/// Every run's variants, or those of one name.
pub fn variants(s: &mut dyn Store, name: Option<&str>) -> Result<Vec<VariantRow>, StoreError> {
    typed(&s.select(&VARIANTS, name.map(|n| ("name", n)))?)
}

/// One run with its variants and cases.
pub fn record(s: &mut dyn Store, run: &Run) -> Result<RunRecord, StoreError> {
    let id = run.id.as_str();
    Ok(RunRecord {
        run: run.clone(),
        variants: typed(&s.select(&VARIANTS, Some(("run_id", id)))?)?,
        cases: typed::<CaseRow>(&s.select(&CASES, Some(("run_id", id)))?)?,
    })
}
