//! Every environment variable the code reads is read through `accprobe::config`, declared
//! in `config::VARIABLES`, and has its row in docs/reference.md's table, and no other row
//! is there.

use super::docs::{prose_lines, rust_files};
use crate::root;

/// The `ACCPROBE_...` names in a Rust file's text, quoted as string literals, outside its
/// `#[cfg(test)] mod tests` and except `ACCPROBE_TEST_*`: the variables the code names
/// (in a message, or for a process it starts), not those only its tests use.
fn variables_in_code(text: &str) -> Vec<String> {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("\"ACCPROBE_") {
        let after = &rest[at + 1..];
        let end = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..end];
        if after[end..].starts_with('"') && !name.starts_with("ACCPROBE_TEST_") {
            names.push(name.to_string());
        }
        rest = &after[end..];
    }
    names
}

/// The reads of an `ACCPROBE_` variable that bypass `accprobe::config` in a Rust file's
/// text (tests too): `env::var("ACCPROBE_..")`, `env::var_os("ACCPROBE_..")`, or either
/// with one of `consts` (config's `*_ENV` names) as the argument, possibly by a path.
fn reads_outside_config(text: &str, consts: &[&str]) -> Vec<String> {
    let mut reads = Vec::new();
    for call in ["env::var(", "env::var_os("] {
        let mut rest = text;
        while let Some(at) = rest.find(call) {
            let arg = &rest[at + call.len()..];
            let end = arg.find([')', ',']).unwrap_or(arg.len());
            let arg = arg[..end].trim();
            let last = arg.rsplit("::").next().unwrap_or(arg);
            if arg.starts_with("\"ACCPROBE_") || consts.contains(&last) {
                reads.push(format!("{call}{arg})"));
            }
            rest = &rest[at + call.len()..];
        }
    }
    reads
}

/// The variables docs/reference.md has a row for: table rows whose first cell is a
/// `` `ACCPROBE_...` `` code span (the public table and the internal one), with the row's
/// other cells.
fn variables_in_reference(markdown: &str) -> Vec<(String, Vec<String>)> {
    prose_lines(markdown)
        .into_iter()
        .filter_map(|(_, line)| {
            let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
            let mut cells = inner.split(" | ").map(|c| c.trim().to_string());
            let first = cells.next()?;
            let name = first.strip_prefix('`')?.strip_suffix('`')?;
            name.starts_with("ACCPROBE_")
                .then(|| (name.to_string(), cells.collect()))
        })
        .collect()
}

/// What is wrong between config's table (name, whether a user sets it, its default) and
/// the reference's rows, each problem naming the variable and what to edit. A user's
/// setting has a row of the public table whose default (the second cell after the name)
/// is config's; an internal variable has a row; no other row is there.
fn variable_problems(
    declared: &[(&str, bool, &str)],
    in_reference: &[(String, Vec<String>)],
) -> Vec<String> {
    let mut problems = Vec::new();
    for &(name, setting, default) in declared {
        match in_reference.iter().find(|(n, _)| n == name) {
            None => problems.push(format!(
                "{name} (in accprobe::config::VARIABLES) has no row in docs/reference.md's variables table: add one (values, default, what a bad value does)"
            )),
            Some((_, cells)) if setting && cells.get(1).map(String::as_str) != Some(default) => {
                problems.push(format!(
                    "docs/reference.md's row for {name} gives the default {:?}, config's table {default:?}: make them one",
                    cells.get(1).map_or("", String::as_str)
                ))
            }
            Some(_) => {}
        }
    }
    let mut seen = Vec::new();
    for (name, _) in in_reference {
        if !declared.iter().any(|(n, ..)| n == name) {
            problems.push(format!(
                "docs/reference.md has a row for {name}, which accprobe::config::VARIABLES does not declare: remove the row, or correct its name"
            ));
        }
        if seen.contains(name) {
            problems.push(format!(
                "docs/reference.md has two rows for {name}: keep one"
            ));
        }
        seen.push(name.clone());
    }
    problems
}

/// config's table as [`variable_problems`] takes it: the variables the reference documents
/// (test-only ones are not).
fn declared() -> Vec<(&'static str, bool, &'static str)> {
    use accprobe::config::{Kind, VARIABLES};
    VARIABLES
        .iter()
        .filter(|v| v.kind != Kind::Test)
        .map(|v| (v.name, v.kind == Kind::Setting, v.default))
        .collect()
}

#[test]
fn every_variable_config_declares_has_a_row_in_the_reference_and_no_other() {
    let declared = declared();
    assert!(declared.len() > 10, "too few variables: {declared:?}");
    let reference = std::fs::read_to_string(root().join("docs/reference.md")).unwrap();
    let problems = variable_problems(&declared, &variables_in_reference(&reference));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_variable_the_code_reads_is_read_through_config_and_declared_there() {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("xtask/src"), &mut files);
    files.sort();
    let config = root.join("src/config/mod.rs");
    let config_dir = root.join("src/config");
    assert!(files.contains(&config));
    let config_text = std::fs::read_to_string(&config).unwrap();
    // config's constants: `pub const X_ENV: &str = "ACCPROBE_..."` (or `pub(crate) const`).
    let consts: Vec<&str> = config_text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("pub const ")
                .or_else(|| l.strip_prefix("pub(crate) const "))?
                .split_once(": &str = \"ACCPROBE_")
        })
        .map(|(name, _)| name)
        .collect();
    assert!(consts.contains(&"TRACE_ENV"), "{consts:?}");
    let mut problems = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&config_dir)) {
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(&root).unwrap().display();
        for read in reads_outside_config(&text, &consts) {
            problems.push(format!(
                "{rel} reads {read} itself: read it through accprobe::config"
            ));
        }
        for name in variables_in_code(&text) {
            if accprobe::config::variable(&name).is_none() {
                problems.push(format!(
                    "{rel} names {name}, which accprobe::config::VARIABLES does not declare: declare it there"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_variable_checks_find_what_they_should() {
    let code = r#"
pub const A: &str = "ACCPROBE_ALPHA";
fn f() { std::env::var("ACCPROBE_BETA"); let _ = "ACCPROBE_TEST_ONLY"; }
let not_a_literal = ACCPROBE_GAMMA;
let x = std::env::var_os(config::TRACE_ENV).map(PathBuf::from);
let y = std::env::var_os(OTHER_ENV);
#[cfg(test)]
mod tests {
    fn g() { std::env::set_var("ACCPROBE_IN_TESTS", "1"); env::var_os(TRACE_ENV, ); }
}
"#;
    assert_eq!(variables_in_code(code), ["ACCPROBE_ALPHA", "ACCPROBE_BETA"]);
    assert_eq!(
        reads_outside_config(code, &["TRACE_ENV"]),
        [
            "env::var(\"ACCPROBE_BETA\")",
            "env::var_os(config::TRACE_ENV)",
            "env::var_os(TRACE_ENV)",
        ]
    );
    let reference = "\
| variable | values | default | a bad value |
| --- | --- | --- | --- |
| `ACCPROBE_ALPHA` | mentions `ACCPROBE_BETA` in a later cell | 2 | exit 2 |
| `ACCPROBE_STALE` | no code reads it | off | exit 2 |
| `ACCPROBE_ALPHA` | twice | 2 | exit 2 |
| `ACCPROBE_DELTA` | a file | `x` | exit 2 |
| `ACCPROBE_INNER` | set for a worker |
```text
| `ACCPROBE_FENCED` | in a code block, not a row |
```
";
    let rows = variables_in_reference(reference);
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "ACCPROBE_ALPHA",
            "ACCPROBE_STALE",
            "ACCPROBE_ALPHA",
            "ACCPROBE_DELTA",
            "ACCPROBE_INNER"
        ]
    );
    assert_eq!(rows[0].1[1], "2");
    let declared = [
        ("ACCPROBE_ALPHA", true, "2"),
        ("ACCPROBE_BETA", true, "off"),
        ("ACCPROBE_DELTA", true, "`y`"),
        ("ACCPROBE_INNER", false, "unset"),
    ];
    let problems = variable_problems(&declared, &rows);
    let expected = [
        "ACCPROBE_BETA (in accprobe::config::VARIABLES) has no row",
        "the default \"`x`\", config's table \"`y`\"",
        "docs/reference.md has a row for ACCPROBE_STALE",
        "two rows for ACCPROBE_ALPHA",
    ];
    for e in expected {
        assert!(
            problems.iter().any(|p| p.contains(e)),
            "{e} not among {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}
