//! YAML loading shared by profiles, baselines and policies: saphyr's errors turned into
//! ones that name file, line and column, and text read as UTF-8 with a clear error.

use crate::error::{Error, Result};
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

/// Reads `file` as UTF-8; `what` names it in errors.
pub fn read_text(file: &Path, what: &str) -> Result<String> {
    let bytes = std::fs::read(file).map_err(|e| Error::io(file, &format!("read {what}"), e))?;
    String::from_utf8(bytes).map_err(|e| {
        Error::in_file(
            file,
            format!(
                "{what} is not valid UTF-8 (byte offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Numbers as YAML writes them, never quoted: `repeats: "10"` is a string, and a
/// hand-written file that quotes a number is refused ("expected a number, found the string
/// "10"") rather than read as one. saphyr reads a quoted scalar into a number field
/// without a word, and none of its options changes that, so number fields go through
/// these functions (`#[serde(deserialize_with = "number::plain")]`): they ask saphyr for
/// whatever the scalar is (`deserialize_any`, under which quoted scalars stay strings) and
/// accept only numbers that fit the field.
pub mod number {
    use serde::de::{self, Deserialize, Deserializer, Visitor};
    use serde_saphyr::Spanned;
    use std::fmt;
    use std::marker::PhantomData;

    /// A number type a field may hold, converted from what YAML gave without loss.
    pub trait FromYaml: Sized {
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
    pub struct Unquoted<T>(pub T);

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
            T::from_f64(v)
                .map(Unquoted)
                .ok_or_else(|| Self::out_of_range(v))
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
    pub fn plain<'de, D: Deserializer<'de>, T: FromYaml>(d: D) -> Result<T, D::Error> {
        Unquoted::<T>::deserialize(d).map(|n| n.0)
    }

    /// A number field kept with its position.
    pub fn spanned<'de, D: Deserializer<'de>, T: FromYaml>(d: D) -> Result<Spanned<T>, D::Error> {
        let s = Spanned::<Unquoted<T>>::deserialize(d)?;
        Ok(Spanned::new(s.value.0, s.referenced, s.defined))
    }

    /// A list of numbers, each kept with its position.
    pub fn spanned_list<'de, D: Deserializer<'de>, T: FromYaml>(
        d: D,
    ) -> Result<Vec<Spanned<T>>, D::Error> {
        let list = Vec::<Spanned<Unquoted<T>>>::deserialize(d)?;
        Ok(list
            .into_iter()
            .map(|s| Spanned::new(s.value.0, s.referenced, s.defined))
            .collect())
    }

    /// An optional number field (use with `#[serde(default)]`).
    pub fn optional<'de, D: Deserializer<'de>, T: FromYaml>(d: D) -> Result<Option<T>, D::Error> {
        Ok(Option::<Unquoted<T>>::deserialize(d)?.map(|n| n.0))
    }
}
