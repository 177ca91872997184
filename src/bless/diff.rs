//! What a bless changes, one line a change: `~` changed, `+` added, `-` removed, for the
//! progress figures, the SASS and loop schedule digests and the policy's picks.

use crate::expectations::baselines::{Baselines, PickBaseline};
use crate::expectations::profile::Profile;
use crate::model::results::{short_digest, SassSummary};
use crate::model::variant::Variant;
use std::collections::BTreeMap;

/// The progress figures of `profile`'s variants, `current`'s against `new`.
pub(super) fn progress(
    profile: &Profile,
    current: Option<&Baselines>,
    new: &BTreeMap<String, f64>,
) -> Vec<String> {
    let empty = BTreeMap::new();
    let old = current.map_or(&empty, |b| &b.progress);
    let mut diff = Vec::new();
    for v in profile.probe.variants() {
        let name = v.name();
        match (old.get(&name), new.get(&name)) {
            (Some(a), Some(b)) if (a - b).abs() > 0.05 => diff.push(format!(
                "~ {name}: {a:.1} -> {b:.1} ({:+.3}%)",
                (b / a - 1.0) * 100.0
            )),
            (None, Some(b)) => diff.push(format!("+ {name}: {b:.1}")),
            (Some(a), None) => diff.push(format!("- {name}: {a:.1}")),
            _ => {}
        }
    }
    diff
}

/// The SASS and loop schedule digests of the variants `with_sass`, `current`'s against the
/// measured ones.
pub(super) fn sass(
    current: Option<&Baselines>,
    with_sass: &[(Variant, &SassSummary)],
) -> Vec<String> {
    let empty_sass = BTreeMap::new();
    let old_sass = current.map_or(&empty_sass, |b| &b.sass);
    let mut diff = Vec::new();
    for (v, x) in with_sass {
        match old_sass.get(&v.name()) {
            Some(b) if b.digest != x.digest => diff.push(format!(
                "~ {v}: SASS digest {} -> {}",
                short_digest(&b.digest),
                x.short_digest()
            )),
            None => diff.push(format!("+ {v}: SASS digest {}", x.short_digest())),
            _ => {}
        }
        let then = old_sass
            .get(&v.name())
            .and_then(|b| b.schedule_digest.as_deref());
        match (then, x.schedule_digest.as_deref()) {
            (Some(a), Some(b)) if a != b => diff.push(format!(
                "~ {v}: loop schedule {} -> {}",
                short_digest(a),
                short_digest(b)
            )),
            (None, Some(b)) => diff.push(format!("+ {v}: loop schedule {}", short_digest(b))),
            _ => {}
        }
    }
    diff
}

/// The policy's picks, `current`'s against `picks`.
pub(super) fn picks(
    current: Option<&Baselines>,
    picks: &BTreeMap<String, PickBaseline>,
) -> Vec<String> {
    let empty_picks = BTreeMap::new();
    let old_picks = current.map_or(&empty_picks, |b| &b.policy_picks);
    let mut diff = Vec::new();
    for (context, new) in picks {
        match old_picks.get(context) {
            Some(old) if old.accumulators != new.accumulators => diff.push(format!(
                "~ policy pick {context}: acc{} ({:.1}) -> acc{} ({:.1})",
                old.accumulators, old.progress, new.accumulators, new.progress
            )),
            None => diff.push(format!(
                "+ policy pick {context}: acc{} ({:.1})",
                new.accumulators, new.progress
            )),
            _ => {}
        }
    }
    for (context, old) in old_picks {
        if !picks.contains_key(context) {
            diff.push(format!("- policy pick {context}: acc{}", old.accumulators));
        }
    }
    diff
}
