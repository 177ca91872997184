//! The repository documents itself: no text points outside it, every relative Markdown link
//! lands on a file (and heading) inside it, and the study's table in `docs/study.md` is the
//! one `expectations/documented.yaml` replays.

use crate::root;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// What the walk covers, relative to the repository root.
const ROOTS: &[&str] = &[
    "README.md",
    "ARCHITECTURE.md",
    "docs",
    "src",
    "kernels",
    "expectations",
    "ci",
    "xtask",
];

/// Text that points at the workplace around the repository rather than into it. Built from
/// pieces so that this file does not hold the words it looks for.
fn outside_references() -> [String; 2] {
    [["..", "/shared"].concat(), ["PROBE", ".md"].concat()]
}

/// Every text file under `ROOTS`, except build output and recorded JUnit files (a device
/// run's output, kept as the run wrote it).
fn text_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(&path, out);
                }
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for r in ROOTS {
        let p = root().join(r);
        if p.is_dir() {
            walk(&p, &mut files);
        } else if p.is_file() {
            files.push(p);
        }
    }
    files.retain(|p| !p.to_string_lossy().ends_with(".junit.xml"));
    files.sort();
    files
}

/// Drops fenced code blocks; yields (line number, line) of the rest.
pub(super) fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    prose_lines(markdown)
        .into_iter()
        .filter_map(|(_, l)| l.strip_prefix('#'))
        .map(|h| slug(h.trim_start_matches('#')))
        .collect()
}

/// The link targets on one line: inline `[text](target)` and definitions `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    // Code spans are not links; a link's text may hold one (`[`a.md`](a.md)`), which is fine
    // to drop.
    let mut plain = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            plain.push_str(part);
        }
    }
    let mut targets = Vec::new();
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        targets.push(after[..end].to_string());
        rest = &after[end..];
    }
    let t = plain.trim_start();
    if t.starts_with('[') {
        if let Some(at) = t.find("]:") {
            targets.push(t[at + 2..].to_string());
        }
    }
    targets
        .into_iter()
        .map(|t| {
            let t = t.trim().trim_start_matches('<');
            let t = t.split_whitespace().next().unwrap_or("");
            t.trim_end_matches('>').to_string()
        })
        .collect()
}

/// What is wrong with the relative links of one Markdown file at `file` (relative to
/// `root`): a target outside the repository, a file that does not exist, an anchor that
/// names no heading.
fn link_problems(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (line_no, line) in prose_lines(text) {
        for target in link_targets(line) {
            let at = format!("{}:{line_no}: link {target:?}", file.display());
            let scheme = target.find(':').is_some_and(|c| !target[..c].contains('/'));
            if target.is_empty() || scheme {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            if path.starts_with('/') {
                problems.push(format!("{at} is an absolute path"));
                continue;
            }
            let mut resolved = PathBuf::new();
            let mut outside = false;
            let base = file.parent().unwrap_or(Path::new(""));
            for c in base.join(path).components() {
                match c {
                    Component::ParentDir => outside |= !resolved.pop(),
                    Component::Normal(n) => resolved.push(n),
                    _ => {}
                }
            }
            if outside {
                problems.push(format!("{at} leaves the repository"));
                continue;
            }
            let full = root.join(&resolved);
            let linked = if path.is_empty() {
                Some(text.to_string())
            } else if !full.exists() {
                problems.push(format!("{at}: {} does not exist", resolved.display()));
                continue;
            } else if full.extension().is_some_and(|e| e == "md") {
                std::fs::read_to_string(&full).ok()
            } else {
                None
            };
            if let (Some(anchor), Some(linked)) = (anchor, linked) {
                if !anchors(&linked).iter().any(|a| a == anchor) {
                    problems.push(format!("{at}: no heading with anchor #{anchor}"));
                }
            }
        }
    }
    problems
}

#[test]
fn no_text_points_outside_the_repository() {
    let root = root();
    let mut problems = Vec::new();
    let files = text_files();
    assert!(files.iter().any(|f| f.ends_with("docs/study.md")));
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text
        };
        let rel = file.strip_prefix(&root).unwrap();
        for (i, line) in text.lines().enumerate() {
            for word in outside_references() {
                if line.contains(&word) {
                    problems.push(format!(
                        "{}:{}: refers to {word}, outside the repository; the study is docs/study.md",
                        rel.display(),
                        i + 1
                    ));
                }
            }
        }
        if rel.extension().is_some_and(|e| e == "md") {
            problems.extend(link_problems(&root, rel, &text));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_link_check_finds_what_it_should() {
    let root = root();
    let file = Path::new("docs/page.md");
    let text = "\
[up and out](../../elsewhere.md) [sibling](../kernels/none.cu)
[missing](nowhere.md) [abs](/etc/passwd) [bad anchor](study.md#no-such-heading)
```sh
[in a fence](not-checked.md)
```
[good](study.md#the-recorded-table) [web](https://example.com/a.md) [here](#local)
`[code](not-a-link.md)` [readme](../README.md)
[ref]: ../../out.md
# Local
";
    let problems = link_problems(&root, file, text);
    let expected = [
        "../../elsewhere.md\" leaves the repository",
        "../kernels/none.cu\": kernels/none.cu does not exist",
        "nowhere.md\": docs/nowhere.md does not exist",
        "/etc/passwd\" is an absolute path",
        "no heading with anchor #no-such-heading",
        "../../out.md\" leaves the repository",
    ];
    for e in expected {
        assert!(
            problems.iter().any(|p| p.contains(e)),
            "{e} not among {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

/// The progress table under `heading` in a Markdown file: chain -> accumulators -> value.
fn markdown_table(text: &str, heading: &str) -> BTreeMap<u32, BTreeMap<u32, f64>> {
    let start = text.find(heading).expect("heading");
    let mut columns: Vec<u32> = Vec::new();
    let mut table = BTreeMap::new();
    for line in text[start..].lines().skip(1) {
        if line.starts_with('#') {
            break;
        }
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.first() == Some(&"chain") {
            columns = cells[1..]
                .iter()
                .map(|c| c.trim_start_matches("acc").parse().unwrap())
                .collect();
        } else if let Ok(chain) = cells[0].parse::<u32>() {
            assert_eq!(cells.len(), columns.len() + 1, "{line}");
            let row = columns
                .iter()
                .zip(&cells[1..])
                .map(|(k, v)| (*k, v.replace(',', "").parse::<f64>().unwrap()))
                .collect();
            table.insert(chain, row);
        }
    }
    table
}

#[test]
fn the_study_page_carries_the_replayed_table() {
    #[derive(serde::Deserialize)]
    struct Documented {
        recorded: Recorded,
    }
    #[derive(serde::Deserialize)]
    struct Recorded {
        progress: BTreeMap<u32, BTreeMap<u32, f64>>,
    }
    let root = root();
    let yaml = std::fs::read_to_string(root.join("expectations/documented.yaml")).unwrap();
    let documented: Documented = serde_saphyr::from_str(&yaml).unwrap();
    let page = std::fs::read_to_string(root.join("docs/study.md")).unwrap();
    let table = markdown_table(&page, "## The recorded table");
    assert_eq!(table.len(), 3, "{table:?}");
    assert_eq!(table, documented.recorded.progress);
}

/// Every `.rs` file under `dir`.
pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The table cells of a Markdown text longer than `cells` characters, and its lines longer
/// than `lines`, as `file:line: ...` problems (code blocks count for lines, not cells).
fn length_problems(file: &str, text: &str, cells: usize, lines: usize) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = line.chars().count();
        if n > lines {
            problems.push(format!(
                "{file}:{}: a line of {n} characters (at most {lines}): break it",
                i + 1
            ));
        }
    }
    for (line_no, line) in prose_lines(text) {
        if !line.trim_start().starts_with('|') {
            continue;
        }
        for cell in line.trim().trim_matches('|').split('|') {
            let n = cell.trim().chars().count();
            if n > cells {
                problems.push(format!(
                    "{file}:{line_no}: a table cell of {n} characters (at most {cells}): move the detail into prose or a table in docs/"
                ));
            }
        }
    }
    problems
}

#[test]
fn the_readme_is_a_front_door_and_no_table_cell_of_the_docs_is_an_essay() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut problems = length_problems("README.md", &readme, 300, 400);
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.push(root.join("ci/README.md"));
    pages.sort();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let rel = page.strip_prefix(&root).unwrap().display().to_string();
        problems.extend(length_problems(&rel, &text, 1000, usize::MAX));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_length_check_finds_what_it_should() {
    let long = "x".repeat(301);
    let text = format!(
        "| a | {long} |\n```\n| {long} |\n```\n{}\n",
        "y".repeat(401)
    );
    let problems = length_problems("README.md", &text, 300, 400);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("README.md:5: a line of 401"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("README.md:1: a table cell of 301"),
        "{problems:#?}"
    );
}

#[test]
fn the_walk_covers_the_new_pages() {
    let files = text_files();
    for page in [
        "docs/reference.md",
        "docs/profiles.md",
        "ci/README.md",
        "README.md",
    ] {
        assert!(
            files.iter().any(|f| f.ends_with(page)),
            "{page} is not among the files the link check walks"
        );
    }
}

/// The module files under `src/` that ARCHITECTURE.md's code map and cross-cutting table do
/// not name: a folder's files by their module name (`name`, `x::name` or `name.rs`) in that
/// folder's section, a top-level file by its path; and every `src/...` path the page names
/// that does not exist.
fn code_map_problems(architecture: &str, files: &[String]) -> Vec<String> {
    let section = |heading: &str| -> Option<&str> {
        let start = architecture.find(heading)?;
        let rest = &architecture[start + heading.len()..];
        Some(
            &rest[..rest
                .find("\n### ")
                .or(rest.find("\n## "))
                .unwrap_or(rest.len())],
        )
    };
    let mut problems = Vec::new();
    for file in files {
        let parts: Vec<&str> = file.trim_start_matches("src/").split('/').collect();
        let name = parts.last().unwrap().trim_end_matches(".rs");
        if parts.len() == 1 {
            if name != "lib" && !architecture.contains(&format!("`{file}`")) {
                problems.push(format!("{file} is not named in ARCHITECTURE.md"));
            }
            continue;
        }
        if matches!(name, "mod" | "tests") {
            continue;
        }
        let heading = format!("### `src/{}/`", parts[0]);
        let Some(text) = section(&heading) else {
            problems.push(format!("{file}: ARCHITECTURE.md has no section {heading}"));
            continue;
        };
        let named = [
            format!("`{name}`"),
            format!("::{name}`"),
            format!("`{name}::"),
            format!("{name}.rs"),
            format!("`{name}/"),
        ];
        if !named.iter().any(|n| text.contains(n.as_str())) {
            problems.push(format!(
                "{file}: module `{name}` is not named in the section {heading} of ARCHITECTURE.md"
            ));
        }
    }
    for path in architecture
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| p.starts_with("src/"))
    {
        let exists = files.iter().any(|f| f == path || f.starts_with(path));
        if !exists {
            problems.push(format!(
                "ARCHITECTURE.md names {path}, which does not exist"
            ));
        }
    }
    problems
}

#[test]
fn the_code_map_names_every_module_and_only_modules_that_exist() {
    let root = root();
    let mut found = Vec::new();
    rust_files(&root.join("src"), &mut found);
    let files: Vec<String> = found
        .iter()
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let problems = code_map_problems(&architecture, &files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_code_map_check_finds_what_it_should() {
    let page = "## Code map\n### `src/a/` — a\n`one` and `b::two`.\n### `src/c.rs` — c\n\
                `src/gone.rs` and `src/a/`\n## Tests\n";
    let files = [
        "src/a/mod.rs",
        "src/a/one.rs",
        "src/a/two.rs",
        "src/a/three.rs",
        "src/c.rs",
        "src/d.rs",
        "src/e/x.rs",
        "src/lib.rs",
    ]
    .map(String::from);
    assert_eq!(
        code_map_problems(page, &files),
        [
            "src/a/three.rs: module `three` is not named in the section ### `src/a/` of ARCHITECTURE.md",
            "src/d.rs is not named in ARCHITECTURE.md",
            "src/e/x.rs: ARCHITECTURE.md has no section ### `src/e/`",
            "ARCHITECTURE.md names src/gone.rs, which does not exist",
        ]
    );
}
