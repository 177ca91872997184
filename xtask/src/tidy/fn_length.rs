//! No function in `src/` or `xtask/src/` is longer than [`LIMIT`] lines, counted from the
//! line that says `fn` to the line of its closing brace. Test code (`#[cfg(test)]` items and
//! `tests.rs` files) is not counted, nor the data tables of [`ALLOWED`].

use crate::testing::root;
use std::path::Path;

/// The most lines a function may take.
const LIMIT: usize = 80;

/// Functions allowed over [`LIMIT`]: (file under the workspace, function, why).
const ALLOWED: &[(&str, &str, &str)] = &[];

/// One function's length: where it starts and how many lines it takes.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// `source` with every comment, string and character literal blanked to spaces, newlines
/// kept, so that a brace or `fn` in one is not read as code.
fn code_only(source: &str) -> String {
    let mut lexer = Blanker {
        s: source.chars().collect(),
        i: 0,
        out: String::with_capacity(source.len()),
    };
    while lexer.i < lexer.s.len() {
        lexer.step();
    }
    lexer.out
}

/// Copies code and blanks what is not code, one token at a time.
struct Blanker {
    s: Vec<char>,
    i: usize,
    out: String,
}

impl Blanker {
    fn at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    /// Blanks the next `n` characters (fewer at the end).
    fn blank(&mut self, n: usize) {
        for _ in 0..n.min(self.s.len() - self.i) {
            let c = self.s[self.i];
            self.out.push(if c == '\n' { '\n' } else { ' ' });
            self.i += 1;
        }
    }

    /// Reads one token: a comment, a literal or a character of code.
    fn step(&mut self) {
        let after_word = self.i > 0 && {
            let p = self.s[self.i - 1];
            p.is_alphanumeric() || p == '_'
        };
        match (self.s[self.i], self.at(1), self.at(2)) {
            ('/', Some('/'), _) => {
                let n = self.s[self.i..].iter().take_while(|c| **c != '\n').count();
                self.blank(n);
            }
            ('/', Some('*'), _) => self.block_comment(),
            ('r', Some('"' | '#'), _) if !after_word && self.raw_string() => {}
            ('"', _, _) => self.string(),
            // A character literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            ('\'', Some('\\'), _) | ('\'', _, Some('\'')) => {
                let start = self.i + if self.at(1) == Some('\\') { 3 } else { 2 };
                let n = self.s[start..].iter().take_while(|c| **c != '\'').count();
                self.blank(start - self.i + n + 1);
            }
            (c, _, _) => {
                self.out.push(c);
                self.i += 1;
            }
        }
    }

    /// A block comment, nested ones inside it.
    fn block_comment(&mut self) {
        let mut depth = 0;
        while self.i < self.s.len() {
            match (self.s[self.i], self.at(1)) {
                ('/', Some('*')) => {
                    depth += 1;
                    self.blank(2);
                }
                ('*', Some('/')) => {
                    depth -= 1;
                    self.blank(2);
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.blank(1),
            }
        }
    }

    /// A raw string `r#"..."#`, if one starts here.
    fn raw_string(&mut self) -> bool {
        let hashes = self.s[self.i + 1..]
            .iter()
            .take_while(|c| **c == '#')
            .count();
        if self.at(1 + hashes) != Some('"') {
            return false;
        }
        let close: Vec<char> = std::iter::once('"')
            .chain(std::iter::repeat_n('#', hashes))
            .collect();
        let body = self.i + 2 + hashes;
        let n = (body..self.s.len())
            .find(|j| self.s[*j..].starts_with(&close))
            .map_or(self.s.len(), |j| j + close.len());
        self.blank(n - self.i);
        true
    }

    /// A string, its escapes inside it.
    fn string(&mut self) {
        self.blank(1);
        while let Some(c) = self.at(0) {
            match c {
                '\\' => self.blank(2),
                '"' => return self.blank(1),
                _ => self.blank(1),
            }
        }
    }
}

/// The index of the brace that closes the one at `open` in `code`.
fn closing(code: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in code.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len() - 1
}

/// `code` with each `#[cfg(test)]` item blanked.
fn without_tests(code: &str) -> Vec<char> {
    let mut code: Vec<char> = code.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= code.len() {
        if code[i..].starts_with(&marker) {
            let end = match code[i..].iter().position(|c| *c == '{' || *c == ';') {
                Some(k) if code[i + k] == '{' => closing(&code, i + k),
                Some(k) => i + k,
                None => code.len() - 1,
            };
            for c in &mut code[i..=end] {
                if *c != '\n' {
                    *c = ' ';
                }
            }
            i = end;
        }
        i += 1;
    }
    code
}

/// Every function with a body in `source`, with its length.
fn functions(source: &str) -> Vec<Function> {
    let code = without_tests(&code_only(source));
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let line_of = |at: usize| code[..at].iter().filter(|c| **c == '\n').count() + 1;
    let mut found = Vec::new();
    for at in 0..code.len().saturating_sub(3) {
        if code[at..at + 3] != ['f', 'n', ' '] || (at > 0 && word(code[at - 1])) {
            continue;
        }
        let name: String = code[at + 3..]
            .iter()
            .skip_while(|c| **c == ' ')
            .take_while(|c| word(**c))
            .collect();
        let Some(k) = code[at..].iter().position(|c| *c == '{' || *c == ';') else {
            continue;
        };
        if name.is_empty() || code[at + k] == ';' {
            continue;
        }
        let line = line_of(at);
        let lines = line_of(closing(&code, at + k)) - line + 1;
        found.push(Function { name, line, lines });
    }
    found
}

/// Every `.rs` file under `dir`, as a path under the workspace.
fn rust_files(dir: &Path, under: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{under}/{name}");
        if entry.file_type().unwrap().is_dir() {
            rust_files(&entry.path(), &path, out);
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// Every function over [`LIMIT`] in `src/` and `xtask/src/`: (file, function).
fn too_long() -> Vec<(String, Function)> {
    let mut files = Vec::new();
    for dir in ["src", "xtask/src"] {
        rust_files(&root().join(dir), dir, &mut files);
    }
    files.sort();
    let mut long = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(root().join(&file)).unwrap();
        for f in functions(&source) {
            if f.lines > LIMIT {
                long.push((file.clone(), f));
            }
        }
    }
    long
}

#[test]
fn no_function_is_over_80_lines_but_the_allowed_data_tables() {
    let long = too_long();
    let over: Vec<String> = long
        .iter()
        .filter(|(file, f)| !ALLOWED.iter().any(|(a, n, _)| a == file && *n == f.name))
        .map(|(file, f)| {
            format!(
                "{file}:{} fn {} is {} lines (at most {LIMIT}): split it into named steps",
                f.line, f.name, f.lines
            )
        })
        .collect();
    assert!(over.is_empty(), "{}", over.join("\n"));
    for (file, name, why) in ALLOWED {
        assert!(
            long.iter().any(|(f, l)| f == file && l.name == *name),
            "{file} fn {name} is allowed over {LIMIT} lines ({why}) but is not: take it off \
             ALLOWED"
        );
    }
}

#[test]
fn lengths_count_code_not_comments_strings_or_tests() {
    let source = "fn a() {\n    let s = \"}\"; // }\n    let c = '}';\n    let r = r#\"{\"#;\n}\n\
                  /* fn b() { */\nfn c<'a>(x: &'a str) -> fn(u8) {\n    todo!()\n}\n\
                  trait T { fn d(); }\n#[cfg(test)]\nmod tests {\n    fn e() {}\n}\n";
    let found = functions(source);
    assert_eq!(
        found,
        vec![
            Function {
                name: "a".into(),
                line: 1,
                lines: 5
            },
            Function {
                name: "c".into(),
                line: 7,
                lines: 3
            },
        ]
    );
}
