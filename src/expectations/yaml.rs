//! YAML loading shared by profiles, baselines and policies: saphyr's errors turned into
//! ones that name file, line and column, and text read as UTF-8 with a clear error.

use crate::error::{Error, Result};
use crate::input;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::path::Path;

/// An error at a checked value's position in `file`.
pub fn at<T>(file: &Path, s: &Spanned<T>, message: impl Into<String>) -> Error {
    Error::at(file, s.referenced.line(), s.referenced.column(), message)
}

/// Parses a hand-written file that must not be empty; `what` and `expected` say what it is
/// and what it should hold when it is.
pub fn parse_document<T: for<'de> Deserialize<'de>>(
    text: &str,
    file: &Path,
    what: &str,
    expected: &str,
) -> Result<T> {
    if text.trim().is_empty() {
        return Err(Error::in_file(
            file,
            format!("{what} is empty: expected {expected}"),
        ));
    }
    parse_yaml(text, file)
}

/// Parses YAML into `T`, turning saphyr's error into one that names the file.
pub fn parse_yaml<T: for<'de> Deserialize<'de>>(text: &str, file: &Path) -> Result<T> {
    serde_saphyr::from_str(text).map_err(|e| {
        let rendered = e.to_string();
        let mut lines = rendered.lines();
        let first = lines.next().unwrap_or("invalid YAML");
        // saphyr's first line reads "error: line L column C: message"; keep the message.
        let message = first
            .strip_prefix("error: ")
            .and_then(|s| s.split_once(": ").map(|(_, m)| m))
            .unwrap_or(first);
        let snippet: Vec<String> = lines
            .map(|l| l.replace("<input>", &file.display().to_string()))
            .collect();
        let message = if snippet.is_empty() {
            message.to_string()
        } else {
            format!("{message}\n{}", snippet.join("\n"))
        };
        match e.location() {
            Some(l) => Error::at(file, l.line(), l.column(), message),
            None => Error::in_file(file, message),
        }
    })
}

/// Reads `file` as UTF-8, at most [`input::YAML_LIMIT`] bytes; `what` names it in errors.
pub fn read_text(file: &Path, what: &str) -> Result<String> {
    input::read_text(file, what, input::YAML_LIMIT)
}
