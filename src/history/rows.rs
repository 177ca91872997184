//! The history's rows as Rust types, one per table of [`super::schema`], and their cells:
//! the one place a row becomes the [`Value`]s a store moves and back. A row type names its
//! fields in its table's column order (`row!`), which a test holds to the table.

use super::schema::{Table, CASES, RUNS, VARIANTS};
use super::store::{StoreError, Value};
use serde::{Deserialize, Serialize};

/// A Rust value one cell holds.
pub(crate) trait Cell: Sized {
    fn to_value(&self) -> Value;
    /// `None` when `v` is of another type, or `NULL` where the field takes none.
    fn from_value(v: &Value) -> Option<Self>;
}

impl Cell for Option<String> {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Text(t) => Some(t.clone()),
            _ => None,
        }
    }
}

impl Cell for Option<i64> {
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
}

impl Cell for Option<f64> {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Real(r) => Some(*r),
            // PostgreSQL and SQLite both keep a DOUBLE PRECISION a double; an integer
            // written by hand into the column still reads.
            Value::Int(i) => Some(i.map(|i| i as f64)),
            _ => None,
        }
    }
}

/// A field that takes no `NULL`: the `Option` cell, present.
macro_rules! required {
    ($t:ty) => {
        impl Cell for $t {
            fn to_value(&self) -> Value {
                Some(self.clone()).to_value()
            }
            fn from_value(v: &Value) -> Option<Self> {
                Option::<$t>::from_value(v).flatten()
            }
        }
    };
}
required!(String);
required!(i64);
required!(f64);

/// One table's row.
pub(crate) trait Row: Sized {
    const TABLE: &'static Table;
    /// The field names, in order: the table's column names.
    #[cfg(test)]
    const FIELDS: &'static [&'static str];
    fn to_values(&self) -> Vec<Value>;
    fn from_values(v: &[Value]) -> Result<Self, StoreError>;
}

/// Cell `at` of `v` as the field of column `at` of `table` takes it.
fn cell<T: Cell>(v: &[Value], at: usize, table: &'static Table) -> Result<T, StoreError> {
    let column = table.columns.get(at).map_or("?", |c| c.name);
    let bad = |problem: String| StoreError::BadRow {
        table: table.name,
        column,
        problem,
    };
    let value = v
        .get(at)
        .ok_or_else(|| bad(format!("missing: the row has {} cells", v.len())))?;
    T::from_value(value).ok_or_else(|| bad(format!("{value:?} is not what the column holds")))
}

macro_rules! row {
    ($ty:ident in $table:ident { $($field:ident),* $(,)? }) => {
        impl Row for $ty {
            const TABLE: &'static Table = &$table;
            #[cfg(test)]
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
            fn to_values(&self) -> Vec<Value> {
                vec![$(Cell::to_value(&self.$field)),*]
            }
            fn from_values(v: &[Value]) -> Result<Self, StoreError> {
                let mut at = 0;
                let mut next = || {
                    at += 1;
                    at - 1
                };
                Ok($ty { $($field: cell(v, next(), Self::TABLE)?),* })
            }
        }
    };
}

/// A run: where, when, on what and with what it was measured, and how it was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The first 32 hex digits of the SHA-256 of its results file's text: the same run
    /// recorded twice (a spooled record, an import of a file the run recorded) is one.
    pub id: String,
    /// When the record was made (RFC 3339, UTC).
    pub(crate) recorded_at: String,
    /// When the run measured (its results' date), RFC 3339 UTC.
    pub measured_at: Option<String>,
    /// `suite` (the GPU suite), `probe` (`cargo xtask probe`) or `import`.
    pub origin: String,
    pub host: Option<String>,
    pub gpu_name: Option<String>,
    pub gpu_uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub(crate) compute_capability: Option<String>,
    pub driver: Option<String>,
    pub cuda_driver_api: Option<String>,
    pub nvrtc: Option<String>,
    pub nvrtc_library: Option<String>,
    /// Where the NVRTC came from when `ACCPROBE_NVRTC` chose it.
    pub toolchain: Option<String>,
    /// The NVRTC options, space-separated.
    pub compile_options: Option<String>,
    /// The commit of the checkout the run was made in (`HEAD`), when in one.
    pub checkout_commit: Option<String>,
    pub profile: String,
    /// The SHA-256 of the profile file and its baselines file, as the run read them.
    pub profile_digest: Option<String>,
    /// `serial` or `wave`.
    pub mode: String,
    /// The results' `source` (`measured`, or where a recorded table came from).
    pub(crate) source: String,
    /// `passed`, `failed` (a case failed or could not be judged), or `unjudged`.
    pub verdict: String,
    /// The process's time from its start to the record, seconds.
    pub(crate) run_s: Option<f64>,
    /// The GPU phase, seconds.
    pub(crate) gpu_s: Option<f64>,
    pub(crate) results_schema: i64,
    pub(crate) accprobe_version: String,
}

row!(Run in RUNS {
    id, recorded_at, measured_at, origin, host, gpu_name, gpu_uuid, pci_bus_id,
    compute_capability, driver, cuda_driver_api, nvrtc, nvrtc_library, toolchain,
    compile_options, checkout_commit, profile, profile_digest, mode, source, verdict,
    run_s, gpu_s, results_schema, accprobe_version,
});

/// One variant of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantRow {
    pub run_id: String,
    pub name: String,
    pub(crate) chain: i64,
    pub(crate) accumulators: i64,
    pub(crate) effective: i64,
    /// The sink mode's letter.
    pub(crate) sink: String,
    /// `base`, or the context as a case names it (`w32_v48`).
    pub(crate) context: String,
    /// The median progress over warps and launches (the mean where only it was
    /// recorded): the figure baselines hold.
    pub median: f64,
    pub(crate) mean: f64,
    /// (max - min) / median of the samples.
    pub(crate) spread: Option<f64>,
    pub(crate) samples: i64,
    pub registers: Option<i64>,
    pub spill_store_bytes: Option<i64>,
    pub(crate) spill_load_bytes: Option<i64>,
    pub sass_digest: Option<String>,
    pub schedule_digest: Option<String>,
    pub(crate) sm_clock_mhz: Option<f64>,
}

row!(VariantRow in VARIANTS {
    run_id, name, chain, accumulators, effective, sink, context, median, mean, spread,
    samples, registers, spill_store_bytes, spill_load_bytes, sass_digest, schedule_digest,
    sm_clock_mhz,
});

/// One case of a run, as its JUnit file has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseRow {
    pub(crate) run_id: String,
    /// Its place in the run's JUnit file.
    pub(crate) seq: i64,
    pub suite: String,
    pub name: String,
    /// `passed`, `failed`, `ignored` or `error`.
    pub outcome: String,
    /// The kind of failure or skip (JUnit's `type`).
    pub(crate) kind: Option<String>,
    /// The head of its first-suspect line (`first suspect: the compiler (SASS changed)`).
    pub suspect: Option<String>,
    pub(crate) message: String,
}

row!(CaseRow in CASES { run_id, seq, suite, name, outcome, kind, suspect, message });

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &Table) -> Vec<&'static str> {
        t.columns.iter().map(|c| c.name).collect()
    }

    #[test]
    fn each_row_type_names_its_tables_columns_in_order() {
        assert_eq!(Run::FIELDS, names(Run::TABLE));
        assert_eq!(VariantRow::FIELDS, names(VariantRow::TABLE));
        assert_eq!(CaseRow::FIELDS, names(CaseRow::TABLE));
    }

    #[test]
    fn a_row_reads_back_and_a_wrong_cell_is_an_error_naming_its_column() {
        let row = CaseRow {
            run_id: "r".into(),
            seq: 3,
            suite: "s".into(),
            name: "probe::x".into(),
            outcome: "failed".into(),
            kind: None,
            suspect: Some("first suspect: the compiler".into()),
            message: "m".into(),
        };
        let mut v = row.to_values();
        assert_eq!(CaseRow::from_values(&v).unwrap(), row);
        v[1] = Value::Text(Some("3".into()));
        let e = CaseRow::from_values(&v).unwrap_err().to_string();
        assert!(e.contains("cases, column seq"), "{e}");
        v[1] = Value::Int(None);
        assert!(CaseRow::from_values(&v).is_err(), "seq takes no NULL");
        assert!(CaseRow::from_values(&v[..2]).is_err());
    }
}
