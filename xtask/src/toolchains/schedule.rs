//! `cargo xtask toolchains --compare`'s section on the measured loop's schedule.

use accprobe::model::results::RunResults;
use accprobe::model::variant::Variant;
use accprobe::text::{self, markdown};

/// The section of the comparison on the measured loop's schedule: for each variant whose
/// loop has the same instructions under consecutive toolchains but another schedule (its
/// control fields), what changed and the loop's total stall under each; the variants whose
/// schedule either run does not carry are counted.
pub(super) fn changes(variants: &[Variant], ok: &[(&str, &RunResults)]) -> String {
    use accprobe::model::results::total_stall;
    use accprobe::verdict::sass_diff::{self, Scheduled};
    let mut s =
        String::from("\n## Loop schedule that changed between toolchains (same instructions)\n\n");
    let (mut changed, mut uncompared) = (0, 0);
    for w in ok.windows(2) {
        let ((ta, a), (tb, b)) = (w[0], w[1]);
        let (ta, tb) = (markdown(ta), markdown(tb));
        for v in variants {
            let (Some(x), Some(y)) = (
                a.get(*v).and_then(|r| r.sass.as_ref()),
                b.get(*v).and_then(|r| r.sass.as_ref()),
            ) else {
                continue;
            };
            if x.loop_body != y.loop_body {
                continue; // the loop-body diff above shows it
            }
            match (&x.schedule_digest, &y.schedule_digest) {
                (Some(p), Some(q)) if p != q => {
                    changed += 1;
                    let what = sass_diff::schedule_changes(
                        Scheduled {
                            body: &x.loop_body,
                            control: &x.loop_control,
                        },
                        Scheduled {
                            body: &y.loop_body,
                            control: &y.loop_control,
                        },
                        3,
                    );
                    let stall = |c: &[String]| total_stall(c).map_or("?".into(), |t| t.to_string());
                    s.push_str(&format!(
                        "- {v}, {ta} -> {tb}: same instructions, different schedule: {}; loop total stall {} → {} cycles\n",
                        text::clean(&what),
                        stall(&x.loop_control),
                        stall(&y.loop_control)
                    ));
                }
                (Some(_), Some(_)) => {}
                _ => uncompared += 1,
            }
        }
    }
    if changed == 0 {
        s.push_str("No loop with the same instructions is scheduled otherwise between consecutive toolchains.\n");
    }
    if uncompared > 0 {
        s.push_str(&format!(
            "{uncompared} loops not compared: a run carries no schedule for them (results written before it was decoded, or an architecture whose layout is unknown).\n"
        ));
    }
    s
}
