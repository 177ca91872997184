//! YAML loading shared by profiles, baselines and policies: saphyr's errors turned into
//! ones that name file, line and column, and text read as UTF-8 with a clear error.

use crate::error::{Error, Result};
use crate::input::{self, confined};
use crate::text::excerpt;
use crate::text::Shown;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::path::{Path, PathBuf};

/// An error at a checked value's position in `file`.
pub(crate) fn at<T>(file: &Path, s: &Spanned<T>, message: impl Into<String>) -> Error {
    Error::at(file, s.referenced.line(), s.referenced.column(), message)
}

/// Parses a hand-written file that must not be empty; `what` and `expected` say what it is
/// and what it should hold when it is.
pub(crate) fn parse_document<T: for<'de> Deserialize<'de>>(
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

/// At most this many lines of saphyr's source snippet go into a message.
const SNIPPET_LINES: usize = 6;
/// At most this many characters of one line of it, and of the message.
pub(super) const SNIPPET_WIDTH: usize = 120;

/// Parses YAML into `T`, turning saphyr's error into one that names the file, in the
/// project's words (`yaml_words`). The source snippet saphyr shows is kept short and its
/// control characters escaped: the file may be anything (a binary, another program's
/// file), and the message ends up on a terminal and in the JUnit XML.
pub(crate) fn parse_yaml<T: for<'de> Deserialize<'de>>(text: &str, file: &Path) -> Result<T> {
    serde_saphyr::from_str(text).map_err(|e| {
        let rendered = e.render_with_formatter(&super::yaml_words::Words);
        let mut lines = rendered.lines();
        let first = lines.next().unwrap_or("invalid YAML");
        // saphyr's first line reads "error: line L column C: message"; keep the message.
        let message = first
            .strip_prefix("error: ")
            .and_then(|s| s.split_once(": ").map(|(_, m)| m))
            .unwrap_or(first);
        let mut snippet: Vec<String> = lines
            .by_ref()
            .take(SNIPPET_LINES)
            .map(|l| excerpt(&l.replace("<input>", &file.shown()), SNIPPET_WIDTH))
            .collect();
        if lines.next().is_some() {
            snippet.push("  (…)".into());
        }
        let message = excerpt(message, SNIPPET_WIDTH);
        let message = if snippet.is_empty() {
            message
        } else {
            format!("{message}\n{}", snippet.join("\n"))
        };
        match e.location() {
            Some(l) => Error::at(file, l.line(), l.column(), message),
            None => Error::in_file(file, message),
        }
    })
}

/// An optional section whose key, when written, must hold one (use with
/// `#[serde(default)]`): `reductions:` with nothing after it is YAML's null, which a plain
/// `Option` reads as the key left out, so a section written empty would silently measure
/// and gate nothing. Absent stays `None`; null is refused where it stands.
pub(crate) fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Whether `name` may be part of a case's name (`replay::<profile>::...`,
/// `policy::<name>::...`), which `--exact` takes and every output shows: letters, digits,
/// '_' or '-', at least one.
pub(crate) fn is_case_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What [`is_case_name`] expects, for the messages that refuse a name.
pub(crate) const CASE_NAME: &str = "expected letters, digits, '_' or '-'";

/// `s`, a path a profile names (`key`), resolved under the profile's folder `dir`: no
/// absolute path, no `..` that leaves the folder once the path is normalised, and no
/// symbolic link on the way that leads out of the (real) folder ([`confined`]). A
/// profile may only reach files in its own folder tree, so that a profile cannot make
/// `bless` write, or a run read, anywhere else.
pub(crate) fn path_inside(
    file: &Path,
    dir: &Path,
    key: &str,
    s: &Spanned<String>,
) -> Result<PathBuf> {
    use std::path::Component;
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in Path::new(&s.value).components() {
        match c {
            Component::Prefix(_) | Component::RootDir => {
                return Err(at(
                    file,
                    s,
                    format!(
                        "{key} {:?} is an absolute path: expected a path relative to the profile's folder",
                        excerpt(&s.value, SNIPPET_WIDTH)
                    ),
                ))
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(at(
                        file,
                        s,
                        format!(
                            "{key} {:?} leaves the profile's folder: expected a file in it or below it",
                            excerpt(&s.value, SNIPPET_WIDTH)
                        ),
                    ));
                }
            }
            Component::Normal(p) => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(at(file, s, format!("{key} is empty: expected a file name")));
    }
    let path = parts.iter().fold(dir.to_path_buf(), |p, c| p.join(c));
    if let Err(real) = confined(dir, &path) {
        return Err(at(
            file,
            s,
            format!(
                "{key} {:?} leads through a symbolic link to {}, outside the profile's folder: expected a file in it or below it",
                excerpt(&s.value, SNIPPET_WIDTH),
                real.shown()
            ),
        ));
    }
    Ok(path)
}

/// Adds to a referenced file's error where `file` referenced it (the key `s`).
pub(crate) fn referenced_from<'a, T>(
    file: &'a Path,
    s: &Spanned<T>,
) -> impl FnOnce(Error) -> Error + 'a {
    let (line, column) = (s.referenced.line(), s.referenced.column());
    move |e| e.referenced_from(file, line, column)
}

/// Reads `file` as UTF-8, at most [`input::YAML_LIMIT`] bytes; `what` names it in errors.
pub(crate) fn read_text(file: &Path, what: &str) -> Result<String> {
    input::read_text(file, what, input::YAML_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_of_non_yaml_content_are_short_and_carry_no_control_characters() {
        let text = format!(
            "a: 1\nb: [\x1b[31m\x07\n{}\n{}",
            "x".repeat(5000),
            "root:x:0:0:root:/root:/bin/bash\n".repeat(50)
        );
        let raw = serde_saphyr::from_str::<serde::de::IgnoredAny>(&text)
            .unwrap_err()
            .to_string();
        eprintln!("saphyr's own rendering: {raw:?}");
        let e = parse_yaml::<serde::de::IgnoredAny>(&text, Path::new("p.yaml")).unwrap_err();
        let m = e.to_string();
        assert!(!m.chars().any(|c| c.is_control() && c != '\n'), "{m:?}");
        assert!(m.lines().count() <= SNIPPET_LINES + 2, "{m}");
        assert!(
            m.lines().all(|l| l.chars().count() <= SNIPPET_WIDTH + 40),
            "{m}"
        );
    }

    #[test]
    fn a_fraction_where_a_whole_number_belongs_is_shown_as_written() {
        #[derive(serde::Deserialize, Debug)]
        struct P {
            #[serde(deserialize_with = "number::plain")]
            #[allow(dead_code)]
            blocks: u32,
        }
        let e = parse_yaml::<P>("blocks: 1.0\n", Path::new("p.yaml")).unwrap_err();
        let m = e.to_string();
        // Not "expected a whole number ..., found 1", which contradicts itself.
        assert!(m.contains("found 1.0"), "{m}");
    }

    #[test]
    fn profile_paths_stay_in_the_profile_folder() {
        let s =
            |v: &str| -> Spanned<String> { serde_saphyr::from_str(&format!("{:?}", v)).unwrap() };
        let f = Path::new("e/p.yaml");
        let ok = |v: &str| path_inside(f, Path::new("e"), "k", &s(v)).unwrap();
        assert_eq!(ok("baselines/p.yaml"), Path::new("e/baselines/p.yaml"));
        assert_eq!(ok("./a/../b.yaml"), Path::new("e/b.yaml"));
        for bad in ["/etc/passwd", "../x.yaml", "a/../../x.yaml", "", "."] {
            assert!(
                path_inside(f, Path::new("e"), "k", &s(bad)).is_err(),
                "{bad}"
            );
        }
    }
}

/// Numbers as YAML writes them, never quoted: `repeats: "10"` is a string, and a
/// hand-written file that quotes a number is refused ("expected a number, found the string
/// "10"") rather than read as one. saphyr reads a quoted scalar into a number field
/// without a word, and none of its options changes that, so number fields go through
/// these functions (`#[serde(deserialize_with = "number::plain")]`): they ask saphyr for
/// whatever the scalar is (`deserialize_any`, under which quoted scalars stay strings) and
/// accept only numbers that fit the field.
pub(crate) mod number {
    use serde::de::{self, Deserialize, Deserializer, Visitor};
    use serde_saphyr::Spanned;
    use std::fmt;
    use std::marker::PhantomData;

    /// A number type a field may hold, converted from what YAML gave without loss.
    pub(crate) trait FromYaml: Sized {
        const EXPECTED: &'static str;
        fn from_u64(v: u64) -> Option<Self>;
        fn from_i64(v: i64) -> Option<Self>;
        fn from_f64(v: f64) -> Option<Self>;
    }

    macro_rules! whole {
        ($t:ty, $what:literal) => {
            impl FromYaml for $t {
                const EXPECTED: &'static str = $what;
                fn from_u64(v: u64) -> Option<Self> {
                    <$t>::try_from(v).ok()
                }
                fn from_i64(v: i64) -> Option<Self> {
                    <$t>::try_from(v).ok()
                }
                fn from_f64(_: f64) -> Option<Self> {
                    None
                }
            }
        };
    }
    whole!(u32, "a whole number from 0 to 4294967295");
    whole!(u64, "a whole number from 0 to 18446744073709551615");

    impl FromYaml for f64 {
        const EXPECTED: &'static str = "a number";
        fn from_u64(v: u64) -> Option<Self> {
            Some(v as f64)
        }
        fn from_i64(v: i64) -> Option<Self> {
            Some(v as f64)
        }
        fn from_f64(v: f64) -> Option<Self> {
            Some(v)
        }
    }

    /// A number that was not quoted in the YAML.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub(crate) struct Unquoted<T>(pub(crate) T);

    struct NumberVisitor<T>(PhantomData<T>);

    impl<T: FromYaml> NumberVisitor<T> {
        fn out_of_range<E: de::Error>(shown: impl fmt::Display) -> E {
            E::custom(format!("expected {}, found {shown}", T::EXPECTED))
        }
    }

    impl<'de, T: FromYaml> Visitor<'de> for NumberVisitor<T> {
        type Value = Unquoted<T>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(T::EXPECTED)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            T::from_u64(v)
                .map(Unquoted)
                .ok_or_else(|| Self::out_of_range(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            T::from_i64(v)
                .map(Unquoted)
                .ok_or_else(|| Self::out_of_range(v))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            // `{:?}` keeps the fraction: `1.0`, never `1` (which a whole number field takes).
            T::from_f64(v)
                .map(Unquoted)
                .ok_or_else(|| Self::out_of_range(format!("{v:?}")))
        }

        // A sequence or mapping is refused as such, but read to its end first, so that a
        // syntax error inside it (an unclosed `[1`) is the error reported, as saphyr's own
        // number fields do.
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<de::IgnoredAny>()?.is_some() {}
            Err(de::Error::invalid_type(de::Unexpected::Seq, &self))
        }

        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                .is_some()
            {}
            Err(de::Error::invalid_type(de::Unexpected::Map, &self))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Err(E::custom(format!(
                "expected a number, found the string {v:?} (numbers are written without quotes)"
            )))
        }
    }

    impl<'de, T: FromYaml> Deserialize<'de> for Unquoted<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(NumberVisitor(PhantomData))
        }
    }

    /// A plain number field.
    pub(crate) fn plain<'de, D: Deserializer<'de>, T: FromYaml>(d: D) -> Result<T, D::Error> {
        Unquoted::<T>::deserialize(d).map(|n| n.0)
    }

    /// A number field kept with its position.
    pub(crate) fn spanned<'de, D: Deserializer<'de>, T: FromYaml>(
        d: D,
    ) -> Result<Spanned<T>, D::Error> {
        let s = Spanned::<Unquoted<T>>::deserialize(d)?;
        Ok(Spanned::new(s.value.0, s.referenced, s.defined))
    }

    /// A list of numbers kept with its own position (where an empty list is refused) and
    /// each number's.
    pub(crate) fn spanned_seq<'de, D: Deserializer<'de>, T: FromYaml>(
        d: D,
    ) -> Result<Spanned<Vec<Spanned<T>>>, D::Error> {
        let list = Spanned::<Vec<Spanned<Unquoted<T>>>>::deserialize(d)?;
        let items = list
            .value
            .into_iter()
            .map(|s| Spanned::new(s.value.0, s.referenced, s.defined))
            .collect();
        Ok(Spanned::new(items, list.referenced, list.defined))
    }

    /// An optional number field (use with `#[serde(default)]`).
    pub(crate) fn optional<'de, D: Deserializer<'de>, T: FromYaml>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        Ok(Option::<Unquoted<T>>::deserialize(d)?.map(|n| n.0))
    }

    /// An optional number field kept with its position (use with `#[serde(default)]`).
    pub(crate) fn optional_spanned<'de, D: Deserializer<'de>, T: FromYaml>(
        d: D,
    ) -> Result<Option<Spanned<T>>, D::Error> {
        Ok(Option::<Spanned<Unquoted<T>>>::deserialize(d)?
            .map(|s| Spanned::new(s.value.0, s.referenced, s.defined)))
    }

    /// A list of numbers with its position and each number's, as [`spanned_seq`] reads one.
    pub(crate) type SpannedList<T> = Spanned<Vec<Spanned<T>>>;

    /// An optional list of numbers, as [`spanned_seq`] reads one (use with
    /// `#[serde(default)]`).
    pub(crate) fn optional_spanned_seq<'de, D: Deserializer<'de>, T: FromYaml>(
        d: D,
    ) -> Result<Option<SpannedList<T>>, D::Error> {
        spanned_seq(d).map(Some)
    }
}
