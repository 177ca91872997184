//! serde-saphyr's errors in accprobe's words. Its own messages speak to the programmer
//! who calls it ("set DuplicateKeyPolicy in Options if acceptable", "use `Option<String>`",
//! "use from_str_multiple") or show a value as Rust's Debug writes it ("budget breached:
//! ScalarBytes { total_scalar_bytes: 67108894 }"); a profile's author can act on neither.
//! [`Words`] says those in the project's words, what was found and what was expected, and
//! what saphyr calls a "sequence start" or a "string scalar" as a list or a string; it
//! leaves saphyr's other messages ("unknown field `x`, expected one of ...") as they are.
//! The position (file, line, column) is saphyr's, as before (`yaml::parse_yaml`).

use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{Budget, DefaultMessageFormatter, Error, MessageFormatter};
use std::borrow::Cow;

/// saphyr's message formatter, in the project's words where saphyr's are its API's.
pub(super) struct Words;

impl MessageFormatter for Words {
    fn format_message<'a>(&self, err: &'a Error) -> Cow<'a, str> {
        let said = match err {
            Error::DuplicateMappingKey { key: Some(k), .. } => {
                format!("key {k:?} is given twice: expected each key once in a mapping")
            }
            Error::DuplicateMappingKey { key: None, .. } => {
                "a key is given twice: expected each key once in a mapping".into()
            }
            Error::NullIntoString { .. } | Error::InvalidCharNull { .. } => {
                "found null (~): expected a string".into()
            }
            Error::BinaryNotUtf8 { .. } => {
                "a !!binary value that is not UTF-8 text: expected a string".into()
            }
            Error::MultipleDocuments { .. } => {
                "a second YAML document (after ---): expected one document".into()
            }
            Error::Unexpected { expected, .. } => match *expected {
                "sequence start" => "expected a list (`[a, b]`, or one `- item` per line)".into(),
                "mapping start" => "expected a mapping (`key: value`)".into(),
                "string scalar" => "expected a string".into(),
                "scalar" => "expected a single value, not a list or a mapping".into(),
                _ => return DefaultMessageFormatter.format_message(err),
            },
            Error::Budget { breach, .. } => too_large(breach),
            Error::AliasReplayCounterOverflow { .. }
            | Error::AliasReplayLimitExceeded { .. }
            | Error::AliasExpansionLimitExceeded { .. }
            | Error::AliasReplayStackDepthExceeded { .. } => format!(
                "the aliases (*name) repeat more than a file may hold once expanded: {HAND_WRITTEN}"
            ),
            _ => return DefaultMessageFormatter.format_message(err),
        };
        Cow::Owned(said)
    }
}

/// What every file this reads is.
const HAND_WRITTEN: &str = "expected a hand-written file";

/// A breach of saphyr's limits (the defaults: `parse_yaml` sets none), as a reader of the
/// file can act on it: which limit, and that aliases count as what they repeat.
fn too_large(breach: &BudgetBreach) -> String {
    let limits = Budget::default();
    let expanded = "with every alias (*name) expanded";
    let what = match breach {
        BudgetBreach::ScalarBytes { .. } => format!(
            "the values add up to more than {} MiB {expanded}",
            limits.max_total_scalar_bytes >> 20
        ),
        BudgetBreach::Events { .. } | BudgetBreach::Nodes { .. } => format!(
            "more than {} values, lists and mappings {expanded}",
            limits.max_nodes.min(limits.max_events)
        ),
        BudgetBreach::Aliases { .. } => {
            format!("more than {} aliases (*name)", limits.max_aliases)
        }
        BudgetBreach::Anchors { .. } => {
            format!("more than {} anchors (&name)", limits.max_anchors)
        }
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => format!(
            "{anchors} anchors (&name) used {aliases} times through aliases (*name), more than {} each",
            limits.alias_anchor_ratio_multiplier
        ),
        BudgetBreach::Depth { .. } => format!(
            "lists and mappings nested more than {} deep",
            limits.max_depth
        ),
        BudgetBreach::Documents { .. } => format!(
            "more than {} YAML documents (---)",
            limits.max_documents
        ),
        BudgetBreach::MergeKeys { .. } => format!(
            "more than {} merge keys (<<)",
            limits.max_merge_keys
        ),
        BudgetBreach::SequenceUnbalanced => {
            "a list or mapping closed that was never opened".into()
        }
        _ => format!("more than this reader takes {expanded}"),
    };
    format!("{what}: {HAND_WRITTEN}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expectations::yaml::SNIPPET_WIDTH;

    /// Every breach is said without the names of saphyr's types or fields.
    #[test]
    fn no_breach_is_said_in_the_librarys_words() {
        for b in [
            BudgetBreach::Events { events: 1 },
            BudgetBreach::Aliases { aliases: 1 },
            BudgetBreach::Anchors { anchors: 1 },
            BudgetBreach::Depth { depth: 1 },
            BudgetBreach::Documents { documents: 1 },
            BudgetBreach::Nodes { nodes: 1 },
            BudgetBreach::ScalarBytes {
                total_scalar_bytes: 1,
            },
            BudgetBreach::MergeKeys { merge_keys: 1 },
            BudgetBreach::AliasAnchorRatio {
                aliases: 200,
                anchors: 2,
            },
            BudgetBreach::SequenceUnbalanced,
            BudgetBreach::InputBytes { input_bytes: 1 },
        ] {
            let said = too_large(&b);
            let debug = format!("{b:?}");
            let name = debug.split([' ', '{']).next().unwrap();
            assert!(!said.contains(name) && !said.contains('{'), "{b:?}: {said}");
            assert!(said.ends_with(HAND_WRITTEN), "{said}");
            // Whole within the width `parse_yaml` keeps of a message.
            assert!(said.chars().count() <= SNIPPET_WIDTH, "{said}");
        }
    }
}
