//! The YAML text a draft is written in: a scalar quoted for any text, and comment blocks
//! wrapped at 90 columns. The profile's sections ([`super::render`], [`super::contexts`])
//! are written with them.

/// A YAML scalar for any text.
pub(super) fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// A comment block at column 0 ([`comment_at`]).
pub(super) fn comment(lines: &[String]) -> String {
    comment_at("", lines)
}

/// A comment block indented by `indent`, each line `# `-prefixed and wrapped at 90
/// columns; no newline or carriage return of the text reaches the file.
pub(super) fn comment_at(indent: &str, lines: &[String]) -> String {
    let mut out = String::new();
    for line in lines {
        let mut current = String::new();
        for word in line.split_whitespace() {
            if !current.is_empty() && indent.len() + 2 + current.len() + 1 + word.len() > 90 {
                out.push_str(&format!("{indent}# {current}\n"));
                current.clear();
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push_str(&format!("{indent}# {current}\n"));
    }
    out
}
