//! The history's schema: its tables as data (every statement is built from them, for
//! both backends) and the migrations that create them, applied in order, each once, under
//! a lock, and recorded in `accprobe_schema`. A migration once released is never edited:
//! a change of the schema is a new migration, and `TABLES` says what the last one made.

/// A column's type, as both backends store it: `BIGINT`, `DOUBLE PRECISION`, `TEXT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    Int,
    Real,
    Text,
}

/// A column: its name and type. `NOT NULL` is the migration's; a reader takes `NULL`
/// for an absent value in any column.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
}

/// A table: its name, its columns in the order rows hold them, and its key (the first
/// column of which is the run's id, the key of `runs` itself).
#[derive(Debug, PartialEq, Eq)]
pub struct Table {
    pub(crate) name: &'static str,
    pub(crate) columns: &'static [Column],
    pub(crate) key: &'static [&'static str],
}

const fn int(name: &'static str) -> Column {
    Column {
        name,
        ty: Type::Int,
    }
}
const fn real(name: &'static str) -> Column {
    Column {
        name,
        ty: Type::Real,
    }
}
const fn text(name: &'static str) -> Column {
    Column {
        name,
        ty: Type::Text,
    }
}

pub(crate) static RUNS: Table = Table {
    name: "runs",
    columns: &[
        text("id"),
        text("recorded_at"),
        text("measured_at"),
        text("origin"),
        text("host"),
        text("gpu_name"),
        text("gpu_uuid"),
        text("pci_bus_id"),
        text("compute_capability"),
        text("driver"),
        text("cuda_driver_api"),
        text("nvrtc"),
        text("nvrtc_library"),
        text("toolchain"),
        text("compile_options"),
        text("checkout_commit"),
        text("profile"),
        text("profile_digest"),
        text("mode"),
        text("source"),
        text("verdict"),
        real("run_s"),
        real("gpu_s"),
        int("results_schema"),
        text("accprobe_version"),
    ],
    key: &["id"],
};

pub(crate) static VARIANTS: Table = Table {
    name: "variants",
    columns: &[
        text("run_id"),
        text("name"),
        int("chain"),
        int("accumulators"),
        int("effective"),
        text("sink"),
        text("context"),
        real("median"),
        real("mean"),
        real("spread"),
        int("samples"),
        int("registers"),
        int("spill_store_bytes"),
        int("spill_load_bytes"),
        text("sass_digest"),
        text("schedule_digest"),
        real("sm_clock_mhz"),
    ],
    key: &["run_id", "name"],
};

pub(crate) static CASES: Table = Table {
    name: "cases",
    columns: &[
        text("run_id"),
        int("seq"),
        text("suite"),
        text("name"),
        text("outcome"),
        text("kind"),
        text("suspect"),
        text("message"),
    ],
    key: &["run_id", "seq"],
};

/// Every table, `runs` first (the order rows are inserted in).
#[cfg(test)]
pub(crate) static TABLES: [&Table; 3] = [&RUNS, &VARIANTS, &CASES];

/// The table that records which migrations a store has had.
pub const VERSIONS_TABLE: &str = "accprobe_schema";

/// What creates [`VERSIONS_TABLE`]: before any migration, in the migrating transaction.
pub(crate) const CREATE_VERSIONS: &str = "CREATE TABLE IF NOT EXISTS accprobe_schema (
    version BIGINT PRIMARY KEY,
    applied_at TEXT NOT NULL
)";

/// The migrations, in order: migration `i + 1` is `MIGRATIONS[i]`. Portable SQL that
/// SQLite and PostgreSQL both run as it is.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: runs, their variants and their cases.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        recorded_at TEXT NOT NULL,
        measured_at TEXT,
        origin TEXT NOT NULL,
        host TEXT,
        gpu_name TEXT,
        gpu_uuid TEXT,
        pci_bus_id TEXT,
        compute_capability TEXT,
        driver TEXT,
        cuda_driver_api TEXT,
        nvrtc TEXT,
        nvrtc_library TEXT,
        toolchain TEXT,
        compile_options TEXT,
        checkout_commit TEXT,
        profile TEXT NOT NULL,
        profile_digest TEXT,
        mode TEXT NOT NULL,
        source TEXT NOT NULL,
        verdict TEXT NOT NULL,
        run_s DOUBLE PRECISION,
        gpu_s DOUBLE PRECISION,
        results_schema BIGINT NOT NULL,
        accprobe_version TEXT NOT NULL
    );
    CREATE TABLE variants (
        run_id TEXT NOT NULL REFERENCES runs (id),
        name TEXT NOT NULL,
        chain BIGINT NOT NULL,
        accumulators BIGINT NOT NULL,
        effective BIGINT NOT NULL,
        sink TEXT NOT NULL,
        context TEXT NOT NULL,
        median DOUBLE PRECISION NOT NULL,
        mean DOUBLE PRECISION NOT NULL,
        spread DOUBLE PRECISION,
        samples BIGINT NOT NULL,
        registers BIGINT,
        spill_store_bytes BIGINT,
        spill_load_bytes BIGINT,
        sass_digest TEXT,
        schedule_digest TEXT,
        sm_clock_mhz DOUBLE PRECISION,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE cases (
        run_id TEXT NOT NULL REFERENCES runs (id),
        seq BIGINT NOT NULL,
        suite TEXT NOT NULL,
        name TEXT NOT NULL,
        outcome TEXT NOT NULL,
        kind TEXT,
        suspect TEXT,
        message TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX variants_by_name ON variants (name);
    CREATE INDEX runs_by_measured_at ON runs (measured_at)",
];

/// The schema this accprobe writes: the number of migrations.
pub const SCHEMA: i64 = MIGRATIONS.len() as i64;

/// The most parameters one statement binds: within SQLite's limit (32766) and
/// PostgreSQL's (65535).
pub(crate) const MAX_PARAMS: usize = 30_000;

/// `INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)` for `rows` rows, and for `runs`
/// `ON CONFLICT (id) DO NOTHING` (both backends number parameters `$N`; SQLite takes them
/// as names, indexed in the order they appear).
pub(crate) fn insert_sql(table: &Table, rows: usize) -> String {
    let names: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    let n = names.len();
    let tuples: Vec<String> = (0..rows)
        .map(|r| {
            let params: Vec<String> = (1..=n).map(|i| format!("${}", r * n + i)).collect();
            format!("({})", params.join(", "))
        })
        .collect();
    let conflict = if std::ptr::eq(table, &RUNS) {
        " ON CONFLICT (id) DO NOTHING"
    } else {
        ""
    };
    format!(
        "INSERT INTO {} ({}) VALUES {}{conflict}",
        table.name,
        names.join(", "),
        tuples.join(", ")
    )
}

/// `SELECT a, b FROM t [WHERE column = $1] ORDER BY key`; `column` must be one of the
/// table's (a caller's typo is a bug, not a query).
pub(crate) fn select_sql(table: &Table, column: Option<&str>) -> String {
    let names: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    let filter = column
        .filter(|c| names.contains(c))
        .map_or(String::new(), |c| format!(" WHERE {c} = $1"));
    format!(
        "SELECT {} FROM {}{filter} ORDER BY {}",
        names.join(", "),
        table.name,
        table.key.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_migration_makes_the_tables_as_declared() {
        // Each declared column appears in its table's CREATE, in order, with its type.
        let sql = MIGRATIONS.join("\n");
        for t in TABLES {
            let start = sql
                .find(&format!("CREATE TABLE {} (", t.name))
                .unwrap_or_else(|| panic!("no CREATE TABLE {}", t.name));
            let body = &sql[start..];
            let body = &body[..body.find(");").unwrap_or(body.len())];
            let mut at = 0;
            for c in t.columns {
                let ty = match c.ty {
                    Type::Int => "BIGINT",
                    Type::Real => "DOUBLE PRECISION",
                    Type::Text => "TEXT",
                };
                let decl = format!("\n        {} {ty}", c.name);
                let found = body[at..]
                    .find(&decl)
                    .unwrap_or_else(|| panic!("{}.{}: not declared {ty} in order", t.name, c.name));
                at += found + decl.len();
            }
            assert!(
                body.contains(&format!("PRIMARY KEY ({})", t.key.join(", "))) || t.key == ["id"]
            );
        }
    }

    #[test]
    fn statements_are_built_from_the_tables() {
        assert_eq!(
            insert_sql(&CASES, 2),
            "INSERT INTO cases (run_id, seq, suite, name, outcome, kind, suspect, message) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8), ($9, $10, $11, $12, $13, $14, $15, $16)"
        );
        assert!(insert_sql(&RUNS, 1).ends_with("ON CONFLICT (id) DO NOTHING"));
        assert_eq!(
            select_sql(&CASES, Some("run_id")),
            "SELECT run_id, seq, suite, name, outcome, kind, suspect, message FROM cases \
             WHERE run_id = $1 ORDER BY run_id, seq"
        );
        assert!(!select_sql(&CASES, Some("nope")).contains("WHERE"));
    }
}
