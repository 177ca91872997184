//! What the test files share: the repository's committed data, loaded, and ways to
//! mutate it the way a regression would. Fixtures live in `tests/data/` and the
//! recorded runs the profiles replay in `expectations/recorded/`.

pub mod onboard;

use accprobe::catalog;
use accprobe::compile::{read_sass, Sass};
use accprobe::expectations::baselines::SassBaseline;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::{RunResults, VariantResult};
use accprobe::model::variant::Variant;
use accprobe::verdict::cases::{cases, Case};
use accprobe::verdict::{evaluate, Failure, Outcome};
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A committed profile, by name.
pub fn load(name: &str) -> Profile {
    catalog::load(&root().join("expectations").join(format!("{name}.yaml"))).unwrap()
}

/// A committed profile as its recorded run measured it: without the contexts the run
/// predates (all of them kept once a run recorded since holds them).
pub fn load_as_recorded(name: &str) -> Profile {
    let mut p = load(name);
    if let Some(r) = &p.recorded {
        let held: Vec<_> = r.variants.iter().map(|v| v.context).collect();
        p.probe.contexts.retain(|c| held.contains(c));
    }
    p
}

pub fn case<'a>(cases: &'a [Case], name: &str) -> &'a Case {
    cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

pub fn outcome(p: &Profile, r: &RunResults, name: &str) -> Outcome {
    evaluate(case(&cases(p), name), p, r)
}

/// The whole text of a failure, or a panic saying what `o` concluded instead.
pub fn fail_text(o: Outcome) -> String {
    failed(o).text()
}

/// The failure `o` is, or a panic saying what it concluded instead.
pub fn failed(o: Outcome) -> Failure {
    match o {
        Outcome::Fail(f) => *f,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The whole text of `case`'s failure, or a panic saying what it concluded instead.
pub fn failure(p: &Profile, r: &RunResults, case: &str) -> String {
    failure_of(p, r, case).text()
}

/// `case`'s failure, or a panic saying what it concluded instead.
pub fn failure_of(p: &Profile, r: &RunResults, case: &str) -> Failure {
    match outcome(p, r, case) {
        Outcome::Fail(f) => *f,
        other => panic!("{case} did not fail: {other:?}"),
    }
}

pub fn variant<'a>(r: &'a mut RunResults, name: &str) -> &'a mut VariantResult {
    r.variants.iter_mut().find(|v| v.name == name).unwrap()
}

/// Sets a variant's progress: its mean and, where it has samples, its median too.
pub fn set(results: &mut RunResults, v: Variant, progress: f64) {
    let r = results
        .variants
        .iter_mut()
        .find(|r| r.variant() == v)
        .unwrap();
    r.mean_progress = progress;
    if let Some(s) = r.summary.as_mut() {
        s.mean = progress;
        s.median = progress;
    }
}

/// Scales a variant's mean and median progress.
pub fn scale(r: &mut RunResults, name: &str, factor: f64) {
    let v = variant(r, name);
    v.mean_progress *= factor;
    if let Some(s) = v.summary.as_mut() {
        s.mean *= factor;
        s.median *= factor;
    }
}

/// The cuobjdump SASS recorded on the H200 for the whole H200 matrix.
pub fn h200_sass() -> String {
    std::fs::read_to_string(root().join("tests/data/h200/sass.txt")).unwrap()
}

/// Where `function`'s listing lies in `sass`: from its header (cuobjdump's `Function : NAME`
/// or nvdisasm's `.text.NAME:`) to the next function's header, or the end.
pub fn function_range(sass: &str, function: &str) -> std::ops::Range<usize> {
    let at = sass
        .find(&format!("Function : {function}\n"))
        .or_else(|| sass.find(&format!("\n.text.{function}:\n")))
        .unwrap_or_else(|| panic!("no function {function} in the SASS"));
    let end = [
        sass[at + 1..].find("Function : "),
        sass[at + 1..].find("\n.text."),
    ]
    .into_iter()
    .flatten()
    .min()
    .map_or(sass.len(), |e| at + 1 + e);
    at..end
}

/// `sass` with the first `from` after `function`'s header replaced by `to`.
pub fn mutate(sass: &str, function: &str, from: &str, to: &str) -> String {
    let at = function_range(sass, function).start;
    let rel = sass[at..]
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not in {function}"));
    format!(
        "{}{}{}",
        &sass[..at + rel],
        to,
        &sass[at + rel + from.len()..]
    )
}

/// The H200 profile and its recorded run, the run carrying the SASS of `sass`.
pub fn h200_with(sass: &str) -> (Profile, RunResults) {
    let p = load_as_recorded("h200");
    let mut r = p.recorded.clone().unwrap();
    // The variants the recorded run measured: a profile may list more than it holds
    // (variants its schema predates).
    let variants: Vec<_> = r.variants.iter().map(|v| v.variant()).collect();
    let Sass::Read { kernels, .. } = read_sass(sass, "test".into(), &variants) else {
        panic!("SASS")
    };
    for v in r.variants.iter_mut() {
        v.sass = Some(kernels[&v.name].clone());
    }
    (p, r)
}

/// The H200 listing with the stall of the FFMA before chain7_acc1_effective1's loop clock
/// read raised from 1 to 7 cycles: the schedule change NVRTC 12.4 makes there, with the same
/// instructions.
pub fn stall_7_before_the_clock_read(sass: &str) -> String {
    mutate(
        sass,
        "chain7_acc1_effective1",
        "/* 0x000fe20008000009 */\n        /*01f0*/",
        "/* 0x000fee0008000009 */\n        /*01f0*/",
    )
}

/// [`h200_with`] `mutated`, with SASS baselines blessed from `clean`.
pub fn h200_blessed(clean: &str, mutated: &str) -> (Profile, RunResults) {
    let (mut p, r) = h200_with(mutated);
    let (_, blessed) = h200_with(clean);
    let b = p.baselines.as_mut().unwrap();
    b.sass = blessed
        .variants
        .iter()
        .map(|v| {
            let s = v.sass.clone().unwrap();
            (
                v.name.clone(),
                SassBaseline {
                    digest: s.digest,
                    loop_body: s.loop_body,
                    schedule_digest: s.schedule_digest,
                    loop_control: s.loop_control,
                },
            )
        })
        .collect();
    (p, r)
}

/// Copies the H200 profile into `dir` (beside a `baselines/` folder the test fills), with
/// its recorded results and policy: a profile reaches only files in its own folder tree.
pub fn copy_h200_profile_to(dir: &Path) {
    for f in [
        "h200.yaml",
        "recorded/h200-2026-11-30.json",
        "recorded/h200-2026-11-30-wave.json",
        "policies/study.yaml",
    ] {
        let to = dir.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root().join("expectations").join(f), to).unwrap();
    }
}
