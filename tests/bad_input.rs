//! The bad-input corpus: every file under tests/data/bad/ must be refused with an error
//! that names the file (and line and column where the format has them), never a panic.
//! Adding a case is adding a file: YAML files say what the error must contain in a first
//! line `# expect: ...` (a leading `:L:C:` there means "at line L, column C of the file").
//! Profiles in bad/profiles/baselines-*.yaml name a bad generated file in
//! bad/profiles/baselines/ (a profile reaches only its own folder tree), and the error must
//! point into that file. No error may be longer than 2,000 characters or carry a control character other than a newline: the
//! bad file's bytes must not reach a terminal or the JUnit XML raw.

use accprobe::catalog;
use accprobe::expectations::policy::Policy;
use accprobe::model::results::RunResults;
use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad")
}

fn files(folder: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus().join(folder))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// The `# expect:` line of a file, if it has one.
fn expectation(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let first = bytes.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(first).ok()?;
    line.strip_prefix("# expect: ").map(str::to_string)
}

/// Loads `path` with `load`; returns why it fails, or why the test fails.
fn check(path: &Path, load: fn(&Path) -> Result<(), String>) -> Result<(), String> {
    let owned = path.to_path_buf();
    let error = match catch_unwind(move || load(&owned)) {
        Err(_) => return Err("panicked".into()),
        Ok(Ok(())) => return Err("was accepted".into()),
        Ok(Err(e)) => e,
    };
    // What the file holds may be quoted, briefly: never kilobytes of it.
    if error.chars().count() > 2000 {
        return Err(format!("error of {} characters", error.chars().count()));
    }
    if let Some(c) = error.chars().find(|&c| c.is_control() && c != '\n') {
        return Err(format!("error carries control character {c:?}: {error:?}"));
    }
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let want = expectation(path);
    // The file the error must name: the generated file a profile points at, else itself.
    let named = match want.as_deref().and_then(|w| {
        w.split_once(':')
            .filter(|(f, _)| f.ends_with(".yaml") && f.contains('/'))
    }) {
        Some((f, _)) => f.to_string(),
        None => name.clone(),
    };
    if !error.contains(&named) {
        return Err(format!("error does not name {named}: {error}"));
    }
    if let Some(w) = want {
        // `[file]:L:C: words` or `words`: the position must follow the file's name, and the
        // words must be in the message.
        let (position, words) = split_position(&w);
        if let Some((file, l, c)) = position {
            let at = format!(
                "{}:{l}:{c}:",
                if file.is_empty() { name.as_str() } else { file }
            );
            if !error.contains(&at) {
                return Err(format!("error is not at {at}: {error}"));
            }
        }
        if !error.contains(words) {
            return Err(format!("error lacks {words:?}: {error}"));
        }
    }
    Ok(())
}

/// Splits `dir/file.yaml:4:27: words` or `:4:27: words` into the position and the words.
fn split_position(w: &str) -> (Option<(&str, &str, &str)>, &str) {
    let parts: Vec<&str> = w.splitn(4, ':').collect();
    if parts.len() == 4
        && !parts[1].is_empty()
        && parts[1].bytes().all(|b| b.is_ascii_digit())
        && parts[2].bytes().all(|b| b.is_ascii_digit())
        && !parts[2].is_empty()
    {
        (Some((parts[0], parts[1], parts[2])), parts[3].trim())
    } else {
        (None, w)
    }
}

fn run_folder(folder: &str, load: fn(&Path) -> Result<(), String>) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let all = files(folder);
    for f in &all {
        if let Err(p) = check(f, load) {
            problems.push(format!("{}: {p}", f.display()));
        }
    }
    (all.len(), problems)
}

#[test]
fn every_bad_file_is_refused_with_its_name_and_position_and_never_a_panic() {
    let profiles = run_folder("profiles", |p| {
        catalog::load(p).map(|_| ()).map_err(|e| e.to_string())
    });
    let policies = run_folder("policies", |p| {
        Policy::load(p).map(|_| ()).map_err(|e| e.to_string())
    });
    let results = run_folder("results", |p| {
        RunResults::load(p).map(|_| ()).map_err(|e| e.to_string())
    });
    let total = profiles.0 + policies.0 + results.0;
    assert!(total >= 20, "the corpus has {total} files");
    let problems: Vec<String> = [profiles.1, policies.1, results.1].concat();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn results_errors_carry_a_position_where_json_has_one() {
    for f in files("results") {
        let e = RunResults::load(&f).unwrap_err();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name == "invalid-utf8.json" || name == "other-schema.json" {
            continue; // not a syntax error: no position to give
        }
        assert!(e.position.is_some(), "{name}: {e}");
    }
}
