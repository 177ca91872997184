//! The code map ARCHITECTURE.md draws, held by the code itself: no import up the layers of
//! `src/lib.rs`, no import from a lower stage to a higher one, and no circle among the modules of `src/` or `xtask/src/` (a module is
//! a file; a module's own tests, `#[cfg(test)] mod`, are left out); and the shape of
//! `tests/`: no file over 600 lines, none allowing dead code, every test binary named in
//! ARCHITECTURE.md's Tests section.

use crate::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path in its crate: `["compile", "cache", "entry"]`; the crate root is `[]`.
type ModulePath = Vec<String>;

/// Every module of the crate whose root file is in `dir` (`lib.rs` or `main.rs`), by path.
fn modules(dir: &Path) -> BTreeMap<ModulePath, PathBuf> {
    fn walk(dir: &Path, top: &Path, out: &mut BTreeMap<ModulePath, PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, top, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(top).unwrap().with_extension("");
                let mut path: ModulePath = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    path.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    path.pop();
                }
                out.insert(path, p);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `text` without comments and without its `#[cfg(test)]` modules.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let is_test_mod = line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.contains("mod ") && next.trim_end().ends_with('{'));
        if is_test_mod {
            // Skip to the brace that closes the module.
            let mut depth = 0i32;
            for l in lines.by_ref() {
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                if depth <= 0 && l.contains('}') {
                    break;
                }
            }
            continue;
        }
        let line = line.find("//").map_or(line, |i| &line[..i]);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths a use tree names: `a::{b, c::{d, e}}` gives a::b, a::c::d and a::c::e.
fn use_tree(prefix: &[String], tree: &str) -> Vec<ModulePath> {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(use_tree(prefix, &inner[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        if !inner[start..].trim().is_empty() {
            out.extend(use_tree(prefix, &inner[start..]));
        }
        return out;
    }
    let (head, rest) = match tree.split_once("::") {
        Some((h, r)) => (h.trim(), Some(r)),
        None => (tree.split_whitespace().next().unwrap_or(""), None),
    };
    let is_name = !head.is_empty() && head.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !is_name {
        return vec![prefix.to_vec()];
    }
    let mut path = prefix.to_vec();
    path.push(head.to_string());
    match rest {
        Some(r) => use_tree(&path, r),
        None => vec![path],
    }
}

/// Every path `code` names from its own crate: in `use` items and inline, each starting
/// `crate`, `super` or `self`.
fn named_paths(code: &str) -> Vec<ModulePath> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        out.extend(use_tree(&[], &rest[..end]));
    }
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(
                path.split("::")
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect(),
            );
        }
    }
    out
}

/// Which modules each module of `modules` imports: the longest module prefix of every path
/// it names, leaving out itself and its ancestors (a module's own parent re-exports it).
fn imports(modules: &BTreeMap<ModulePath, PathBuf>) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let mut out: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (here, file) in modules {
        let text = code(&std::fs::read_to_string(file).unwrap());
        for path in named_paths(&text) {
            let mut target: ModulePath = match path.first().map(String::as_str) {
                Some("crate") => Vec::new(),
                Some("super" | "self") => here.clone(),
                _ => continue,
            };
            let mut parts = path.iter().peekable();
            if path[0] == "crate" {
                parts.next();
            }
            while let Some(p) = parts.next_if(|p| *p == "super" || *p == "self") {
                if p == "super" {
                    target.pop();
                }
            }
            target.extend(parts.cloned());
            let found = (0..=target.len())
                .rev()
                .map(|k| target[..k].to_vec())
                .find(|m| modules.contains_key(m));
            if let Some(m) = found {
                if !here.starts_with(&m) {
                    out.entry(here.clone()).or_default().insert(m);
                }
            }
        }
    }
    out
}

/// The circles of `graph`: its strongly connected parts of more than one module (Tarjan).
fn circles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<&'a ModulePath, usize>,
        low: BTreeMap<&'a ModulePath, usize>,
        stack: Vec<&'a ModulePath>,
        found: Vec<Vec<ModulePath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModulePath) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    part.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

/// Each circle in words, with the imports that close it.
fn described(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<String> {
    let name = |m: &ModulePath| m.join("::");
    circles(graph)
        .iter()
        .map(|part| {
            let edges: Vec<String> = part
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| part.contains(b))
                        .map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            edges.join(", ")
        })
        .collect()
}

#[test]
fn no_module_imports_another_in_a_circle() {
    for dir in ["src", "xtask/src"] {
        let modules = modules(&root().join(dir));
        assert!(modules.len() > 10, "{dir}: {} modules", modules.len());
        let graph = imports(&modules);
        assert!(
            graph.values().map(BTreeSet::len).sum::<usize>() > 10,
            "{dir}: too few imports found to trust: {graph:?}"
        );
        let found = described(&graph);
        assert!(
            found.is_empty(),
            "{dir}: import circles:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn the_circle_check_finds_a_circle_through_a_use_tree_and_an_inline_path() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("stage")).unwrap();
    let files = [
        ("lib.rs", "pub mod stage;\npub mod other;\n"),
        ("stage/mod.rs", "pub mod a;\npub mod b;\npub use a::A;\n"),
        ("stage/a.rs", "use super::{b::{B, C}, self as me};\npub struct A;\n"),
        (
            "stage/b.rs",
            "// crate::other::X in a comment is not an import\npub struct B;\nfn f() { crate::other::g(); }\n#[cfg(test)]\nmod tests {\n    use crate::stage::a::A;\n}\n",
        ),
        ("other.rs", "pub fn g() { let _ = crate::stage::a::A; }\n"),
    ];
    for (f, text) in files {
        std::fs::write(d.join(f), text).unwrap();
    }
    let graph = imports(&modules(d));
    assert_eq!(
        described(&graph),
        ["other -> stage::a, stage::a -> stage::b, stage::b -> other"]
    );
    // The parent that re-exports its child is no circle, nor a test module's import.
    std::fs::write(d.join("other.rs"), "pub fn g() {}\n").unwrap();
    assert!(described(&imports(&modules(d))).is_empty());
}

/// The crate modules `path` (a file, or a folder searched through) names as `crate::NAME`
/// outside comments, each with the file that names it.
fn crate_imports(path: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            out.extend(crate_imports(&e.unwrap().path()));
        }
        return out;
    }
    let text = std::fs::read_to_string(path).unwrap();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let name: String = line[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((name, path.to_path_buf()));
        }
    }
    out
}

/// ARCHITECTURE.md's stage invariant for stage 1, the catalog and the verdict stage: no
/// import runs from a lower stage to a higher one (`text`, the sanitiser, is below every
/// stage).
#[test]
fn stage_imports_run_one_way() {
    let src = root().join("src");
    let allowed: [(&str, &[&str]); 3] = [
        (
            "expectations",
            &["expectations", "model", "error", "input", "digest", "text"],
        ),
        (
            "verdict",
            &["verdict", "expectations", "model", "error", "text"],
        ),
        (
            "catalog.rs",
            &[
                "expectations",
                "verdict",
                "model",
                "error",
                "config",
                "text",
            ],
        ),
    ];
    let mut wrong = Vec::new();
    for (module, may) in allowed {
        let found = crate_imports(&src.join(module));
        assert!(!found.is_empty(), "no crate:: path found in {module}");
        for (name, file) in found {
            if !may.contains(&name.as_str()) {
                wrong.push(format!("{} imports crate::{name}", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every `.rs` file under `tests/` (fixtures under `tests/data/` left out), by path
/// relative to the repository root.
fn test_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("tests/data") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("tests"), &mut out);
    out.sort();
    out
}

/// The test binaries of `tests/`: a file at its top, or a folder with a `main.rs`.
fn test_binaries() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("tests"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_stem()?.to_str()?.to_string();
            let binary = if path.is_dir() {
                path.join("main.rs").is_file()
            } else {
                path.extension().is_some_and(|e| e == "rs")
            };
            binary.then_some(name)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn no_test_file_is_over_600_lines_or_allows_dead_code() {
    // Built from pieces so that this file does not hold what it looks for.
    let allow = ["allow(", "dead_code)"].concat();
    let mut problems = Vec::new();
    for file in test_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        let lines = text.lines().count();
        if lines > 600 {
            problems.push(format!("{name}: {lines} lines, more than 600"));
        }
        if text.contains(&allow) {
            problems.push(format!("{name}: {allow}"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_tests_section_names_every_test_binary() {
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let at = architecture.find("\n## Tests\n").expect("a Tests section");
    let section = &architecture[at + 1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let binaries = test_binaries();
    assert!(
        binaries.len() >= 6,
        "only {binaries:?}: the walk finds no binaries"
    );
    let missing: Vec<_> = binaries
        .iter()
        .filter(|b| !section.contains(&format!("| `{b}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's Tests section has no row for the test binaries {missing:?}"
    );
}

/// The layers of `src/lib.rs`, lowest first: each module imports only its own layer and
/// those below it.
const LAYERS: [(&str, &[&str]); 5] = [
    (
        "support",
        &[
            "child",
            "config",
            "digest",
            "error",
            "input",
            "interrupt",
            "output",
            "sync",
            "text",
            "trace",
        ],
    ),
    ("stage", &["expectations", "model", "report", "verdict"]),
    ("GPU", &["compile", "measure", "ownership"]),
    (
        "service",
        &[
            "bless",
            "catalog",
            "compile_only",
            "history",
            "onboard",
            "policy_gate",
        ],
    ),
    ("front end", &["harness"]),
];

/// The imports that run up the layers, besides the documented exception: `config` reads
/// ACCPROBE_MODE into `model`'s `Mode` (src/lib.rs, ARCHITECTURE.md).
fn layer_violations(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<String> {
    const EXCEPTIONS: [(&str, &str); 1] = [("config", "model")];
    let layer = |m: &ModulePath| {
        let top = m.first()?;
        LAYERS
            .iter()
            .position(|(_, mods)| mods.contains(&top.as_str()))
    };
    let mut wrong = Vec::new();
    for (from, targets) in graph {
        for to in targets {
            let (Some(a), Some(b)) = (layer(from), layer(to)) else {
                continue;
            };
            if b > a && !EXCEPTIONS.contains(&(from[0].as_str(), to[0].as_str())) {
                wrong.push(format!(
                    "{} ({}) imports {} ({})",
                    from.join("::"),
                    LAYERS[a].0,
                    to.join("::"),
                    LAYERS[b].0
                ));
            }
        }
    }
    wrong
}

#[test]
fn no_module_imports_a_higher_layer() {
    let modules = modules(&root().join("src"));
    for (_, mods) in LAYERS {
        for m in mods {
            assert!(
                modules.contains_key(&vec![m.to_string()]),
                "src/lib.rs has no module {m}"
            );
        }
    }
    let tops: BTreeSet<&str> = LAYERS.iter().flat_map(|(_, m)| m.iter().copied()).collect();
    for m in modules.keys().filter(|m| m.len() == 1) {
        assert!(tops.contains(m[0].as_str()), "{} is in no layer", m[0]);
    }
    let wrong = layer_violations(&imports(&modules));
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_layer_check_finds_an_import_up_the_layers() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("verdict")).unwrap();
    let files = [
        (
            "lib.rs",
            "pub mod verdict;\npub mod compile;\npub mod config;\npub mod model;\n",
        ),
        ("verdict/mod.rs", "pub mod cases;\n"),
        (
            "verdict/cases.rs",
            "use crate::{model::M, text::T};\nfn f() { crate::compile::run(); }\n",
        ),
        ("compile.rs", "use crate::model::M;\n"),
        ("config.rs", "use crate::model::Mode;\n"),
        ("model.rs", "pub struct M;\n"),
    ];
    for (f, text) in files {
        std::fs::write(d.join(f), text).unwrap();
    }
    assert_eq!(
        layer_violations(&imports(&modules(d))),
        ["verdict::cases (stage) imports compile (GPU)"]
    );
}
