//! The first suspect of a red case: what changed besides the number, from the results and
//! the baselines alone. The SASS digest of a variant the case needs differs from the
//! blessed one (the compiler), or its instructions are the same but the loop's schedule
//! (control fields) differs (the compiler's schedule), or the GPU, driver or NVRTC differ
//! from those the baselines were measured with (the toolchain), or none of these (the
//! hardware, its clocks, or other work on the GPU), so that the reader knows where to look
//! first. A policy case's suspect is the policy (`policy_suspect`) unless the measured
//! progress moved.
//!
//! A suspect is data ([`Suspect`]): who, what changed in a few words, and the detail. Its
//! line has two parts: the head, `first suspect: <who> (<what changed, short>)`, which a
//! JUnit message carries whole beside the verdict (`Suspect::head`), and after
//! `DETAIL` the detail the body carries (digests, versions, clocks, contention).

use super::sass_diff::{schedule_changes, Scheduled};
use crate::expectations::baselines::Baselines;
use crate::expectations::policy_source::{Picks, PolicySource};
use crate::expectations::profile::Profile;
use crate::model::results::{total_stall, RunResults};
use crate::model::variant::Variant;
use crate::text::Shown;

/// At most the first `n` characters of a digest, never panicking on a short or odd one.
pub fn prefix(digest: &str, n: usize) -> &str {
    match digest.char_indices().nth(n) {
        Some((at, _)) => &digest[..at],
        None => digest,
    }
}

fn short(digest: &str) -> String {
    let p = prefix(digest, 12);
    if p.len() < digest.len() {
        format!("{p}..")
    } else {
        p.to_string()
    }
}

/// What every suspect line starts with.
pub(crate) const PREFIX: &str = "first suspect: ";
/// What parts a suspect line's head from its detail.
pub(crate) const DETAIL: &str = " — ";

/// The first suspect of a red case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Suspect {
    pub who: Who,
    /// What changed, in a few words (`SASS changed`, `GPU H100 → H200`).
    pub what: String,
    /// The detail: digests, versions, clocks, contention.
    pub detail: String,
}

/// Whom a red case suspects first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Who {
    /// The SASS of a variant the case needs differs from the blessed one.
    Compiler,
    /// The kernels were compiled with other NVRTC options than the blessed ones.
    CompileOptions,
    /// The same instructions, with another schedule (control fields) in the loop.
    Schedule,
    /// The GPU, driver or NVRTC differ from those of the baselines.
    Toolchain,
    /// None of these changed (or they were not compared).
    Hardware,
    /// The policy of a policy case.
    Policy,
}

impl Who {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Who::Compiler => "the compiler",
            Who::CompileOptions => "the compile options",
            Who::Schedule => "the compiler's schedule",
            Who::Toolchain => "the toolchain or the GPU",
            Who::Hardware => "the hardware, clocks or contention",
            Who::Policy => "the policy",
        }
    }
}

impl Suspect {
    fn new(who: Who, what: impl Into<String>, detail: impl Into<String>) -> Suspect {
        Suspect {
            who,
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// The head: `first suspect: the compiler (SASS changed)`.
    pub(crate) fn head(&self) -> String {
        format!("{PREFIX}{} ({})", self.who.as_str(), self.what)
    }

    /// The whole line: the head, then the detail.
    pub(crate) fn line(&self) -> String {
        format!("{}{DETAIL}{}", self.head(), self.detail)
    }
}

/// The head of a suspect line read back from a rendered text (a JUnit body): the line up
/// to its detail; `None` when `line` is no suspect line.
pub fn head(line: &str) -> Option<&str> {
    line.starts_with(PREFIX)
        .then(|| line.split(DETAIL).next().unwrap_or(line))
}

/// The NVRTC options added (`+--maxrregcount=16`) and removed (`-O3`) since the
/// baselines were blessed; empty when the baselines recorded none (blessed before they
/// were recorded) or the results carry no environment.
pub(crate) fn option_changes(blessed: &[String], now: Option<&[String]>) -> Vec<String> {
    let Some(now) = now.filter(|_| !blessed.is_empty()) else {
        return Vec::new();
    };
    let added = now
        .iter()
        .filter(|o| !blessed.contains(o))
        .map(|o| format!("+{o}"));
    let removed = blessed
        .iter()
        .filter(|o| !now.contains(o))
        .map(|o| format!("-{o}"));
    added.chain(removed).collect()
}

/// The first suspect for a failure of a case that needs `needs`; `None` when the profile
/// has no baselines to compare with.
pub(crate) fn first_suspect(
    needs: &[Variant],
    profile: &Profile,
    results: &RunResults,
) -> Option<Suspect> {
    let b = profile.baselines.as_ref()?;
    let compared = SassComparison::of(needs, b, results);
    let toolchain = toolchain_changes(b, results);
    let toolchain_text = match &toolchain {
        Some(d) if !d.is_empty() => d.join(", "),
        Some(_) => "same driver and NVRTC".into(),
        None => {
            "driver and NVRTC not compared (no environment in the results or no blessed origin)"
                .into()
        }
    };
    let options = option_changes(
        b.origin
            .as_ref()
            .map_or(&[][..], |o| o.compile_options.as_slice()),
        results
            .environment
            .as_ref()
            .map(|e| e.compile_options.as_slice()),
    );
    let options_text = match options.is_empty() {
        true => String::new(),
        false => format!("; options {}", options.join(" ").shown()),
    };
    let sass = if compared.uncompared == 0 {
        "same SASS"
    } else {
        "SASS not compared"
    };
    if let Some((name, then, now)) = compared.changed.first() {
        let more = more(compared.changed.len(), needs);
        let also = also(&toolchain);
        return Some(Suspect::new(
            Who::Compiler,
            format!("SASS changed{options_text}"),
            format!("SASS digest of {name} changed {then} → {now}{more}{also}"),
        ));
    }
    if !options.is_empty() {
        return Some(Suspect::new(
            Who::CompileOptions,
            options.join(" "),
            format!(
                "the kernels were compiled with other NVRTC options than the blessed ones; \
                 {sass}; {toolchain_text}"
            ),
        ));
    }
    if let Some((name, what)) = compared.rescheduled.first() {
        let more = more(compared.rescheduled.len(), needs);
        let also = also(&toolchain);
        return Some(Suspect::new(
            Who::Schedule,
            "same instructions, different schedule",
            format!("{name}: {what}{more}{also}"),
        ));
    }
    if let Some(d) = toolchain.as_ref().filter(|d| !d.is_empty()) {
        return Some(Suspect::new(Who::Toolchain, d.join(", "), sass));
    }
    Some(nothing_changed(
        results,
        &compared,
        toolchain.is_some(),
        &toolchain_text,
    ))
}

/// The needed variants' SASS against the blessed SASS.
struct SassComparison {
    /// The compiler: variants whose SASS differs from the blessed SASS (name, then, now).
    changed: Vec<(String, String, String)>,
    /// Variants without SASS in the results or the baselines.
    uncompared: usize,
    /// The compiler's schedule: same instructions, other control fields in the loop (name,
    /// what changed).
    rescheduled: Vec<(String, String)>,
    /// Variants of the same SASS without a schedule digest on one side.
    schedule_uncompared: usize,
}

impl SassComparison {
    fn of(needs: &[Variant], b: &Baselines, results: &RunResults) -> SassComparison {
        let mut out = SassComparison {
            changed: Vec::new(),
            uncompared: 0,
            rescheduled: Vec::new(),
            schedule_uncompared: 0,
        };
        for v in needs {
            let now = results.get(*v).and_then(|r| r.sass.as_ref());
            match (b.sass.get(&v.name()), now) {
                (Some(base), Some(now)) if base.digest != now.digest => {
                    out.changed
                        .push((v.name(), short(&base.digest), short(&now.digest)))
                }
                (Some(base), Some(now)) => match (&base.schedule_digest, &now.schedule_digest) {
                    (Some(a), Some(b)) if a != b => {
                        let then = Scheduled {
                            body: &base.loop_body,
                            control: &base.loop_control,
                        };
                        let now = Scheduled {
                            body: &now.loop_body,
                            control: &now.loop_control,
                        };
                        out.rescheduled.push((v.name(), rescheduled(then, now)))
                    }
                    (Some(_), Some(_)) => {}
                    _ => out.schedule_uncompared += 1,
                },
                _ => out.uncompared += 1,
            }
        }
        out
    }
}

/// What changed in a loop's schedule between the blessed SASS and the measured one.
fn rescheduled(then: Scheduled, now: Scheduled) -> String {
    let what = schedule_changes(then, now, 2);
    let stall = match (total_stall(then.control), total_stall(now.control)) {
        (Some(a), Some(b)) => format!("; loop total stall {a} → {b} cycles"),
        _ => String::new(),
    };
    format!("{what}{stall}")
}

/// The toolchain (and the GPU): what of the environment differs from the baselines'
/// origin; `None` when either is missing.
fn toolchain_changes(b: &Baselines, results: &RunResults) -> Option<Vec<String>> {
    match (&b.origin, &results.environment) {
        (Some(o), Some(e)) => Some(
            [
                ("GPU", &o.gpu_name, &e.gpu_name),
                ("driver", &o.driver_version, &e.driver_version),
                ("NVRTC", &o.nvrtc_version, &e.nvrtc_version),
            ]
            .into_iter()
            .filter(|(_, then, now)| then != now)
            .map(|(what, then, now)| format!("{what} {} → {}", then.shown(), now.shown()))
            .collect(),
        ),
        _ => None,
    }
}

/// How many more of the `needs` variants changed, beside the first of `changed`.
fn more(changed: usize, needs: &[Variant]) -> String {
    match changed {
        1 => String::new(),
        n => format!(" (and {} more of the {} variants)", n - 1, needs.len()),
    }
}

/// The toolchain's changes, said beside the compiler's.
fn also(toolchain: &Option<Vec<String>>) -> String {
    match toolchain {
        Some(d) if !d.is_empty() => format!("; the toolchain changed too: {}", d.join(", ")),
        _ => String::new(),
    }
}

/// The suspect when neither the SASS, the options nor the toolchain changed (or were not
/// compared): the hardware, its clocks or contention.
fn nothing_changed(
    results: &RunResults,
    compared: &SassComparison,
    toolchain_compared: bool,
    toolchain_text: &str,
) -> Suspect {
    let clock = results
        .environment
        .as_ref()
        .and_then(|e| Some((e.sm_clock_measured_mhz?, e.sm_clock_rated_mhz?)))
        .map(|(m, r)| format!("; SM clock measured {m:.0} MHz, rated {r:.0} MHz"))
        .unwrap_or_default()
        + &contention_note(results);
    let schedule = if compared.schedule_uncompared == 0 {
        ""
    } else {
        " (loop schedule not compared: no schedule digest blessed or decoded; re-bless on the GPU)"
    };
    if compared.uncompared == 0 {
        let same = match toolchain_compared {
            true => "same SASS and toolchain",
            false => "same SASS; toolchain not compared",
        };
        Suspect::new(
            Who::Hardware,
            same,
            format!("same SASS{schedule}, {toolchain_text}{clock}"),
        )
    } else {
        let why = results.sass_unavailable.as_deref().map_or_else(
            || "the results or the baselines carry no SASS for it".into(),
            |why| why.shown(),
        );
        Suspect::new(
            Who::Hardware,
            "SASS not compared",
            format!(
                "{toolchain_text}{clock}; the SASS was not compared ({why}), so a compiler \
                 change is not ruled out"
            ),
        )
    }
}

/// The first suspect of a red policy case about `context` that needs `needs`: the policy,
/// whose program gave no pick, whose pick changed since the bless (its file changed, or
/// its program's answers did), or whose pick falls below the best with the progress as
/// blessed; unless the measured progress of a variant the case needs moved beyond its
/// baseline's tolerance, when the measurement's suspect stands ([`first_suspect`]).
pub(super) fn policy_suspect(
    context: &str,
    picks: Option<&Picks>,
    needs: &[Variant],
    profile: &Profile,
    results: &RunResults,
) -> Option<Suspect> {
    let k = match picks.map(|p| p.of(context)) {
        Some(Ok(k)) => k,
        Some(Err(_)) | None => {
            return Some(Suspect::new(
                Who::Policy,
                "it gave no pick",
                format!(
                    "the policy was asked and gave no pick for {context}: its error is the \
                     verdict; the measurement is not in question"
                ),
            ))
        }
    };
    let b = profile.baselines.as_ref()?;
    if let Some(moved) = progress_moved(needs, b, results) {
        return first_suspect(needs, profile, results).map(|mut s| {
            s.detail = format!("{}; {moved}", s.detail);
            s
        });
    }
    let what = match profile.policy_gate.as_ref().map(|g| &g.source) {
        Some(PolicySource::Command(_)) => "the program's answers",
        _ => "the policy file",
    };
    let same = "the progress of every variant it needs is within its baseline's tolerance";
    Some(match b.policy_picks.get(context).map(|p| p.accumulators) {
        Some(was) if was != k => Suspect::new(
            Who::Policy,
            format!("its pick changed since the bless: acc{was} → acc{k}"),
            format!("{what} changed since the bless; {same}"),
        ),
        _ => Suspect::new(
            Who::Policy,
            format!("its pick acc{k} with the progress as blessed"),
            same,
        ),
    })
}

/// The first variant of `needs` whose progress moved beyond its baseline's tolerance, said
/// in a few words; `None` when none did.
fn progress_moved(needs: &[Variant], b: &Baselines, results: &RunResults) -> Option<String> {
    needs.iter().find_map(|v| {
        let name = v.name();
        let base = *b.progress.get(&name)?;
        let now = results.get(*v)?.mean_progress;
        let tolerance = b.tolerance_of(&name);
        let change = now / base - 1.0;
        (change.abs() > tolerance).then(|| {
            format!(
                "the measured progress moved: {name} {:+.2}% against its baseline",
                change * 100.0
            )
        })
    })
}

/// What the contention checks saw, for the hardware suspect.
fn contention_note(results: &RunResults) -> String {
    let Some(c) = &results.contention else {
        return String::new();
    };
    if let Some(why) = &c.unchecked {
        return format!("; other work on the GPU not checked ({why})");
    }
    let mut seen = Vec::new();
    if !c.foreign_pids.is_empty() {
        let pids: Vec<String> = c.foreign_pids.iter().map(u32::to_string).collect();
        seen.push(format!("other processes (PID {})", pids.join(", ")));
    }
    if !c.throttle_reasons.is_empty() {
        seen.push(format!(
            "clock throttling ({})",
            c.throttle_reasons.join(", ")
        ));
    }
    if seen.is_empty() {
        format!(
            "; no other work or clock throttling seen in {} checks",
            c.checks
        )
    } else {
        format!(
            "; seen on the GPU during the run: {} ({} retries)",
            seen.join(", "),
            c.retries
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_never_panic() {
        assert_eq!(prefix("abcdef", 4), "abcd");
        assert_eq!(prefix("abc", 16), "abc");
        assert_eq!(prefix("", 16), "");
        assert_eq!(prefix("ééééé", 2), "éé");
        assert_eq!(short("0123456789abcdef"), "0123456789ab..");
        assert_eq!(short("abc"), "abc");
    }
}
