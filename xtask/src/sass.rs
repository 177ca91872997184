//! `cargo xtask sass`: a variant's SASS loop body from a results file, each instruction
//! with its control fields (where the results carry them: stall, yield, scoreboards, in
//! CuAssembler's notation, scoreboards renumbered by first use in the loop) and each FFMA
//! marked with the partial accumulator (dependency chain) it extends.

use crate::Failure;
use accprobe::error::Error;
use accprobe::model::results::{total_stall, RunResults, SassSummary};
use accprobe::model::variant::Variant;
use accprobe::text::Shown;
use std::path::{Path, PathBuf};

/// Why `cargo xtask sass` prints no loop.
#[derive(Debug, thiserror::Error)]
pub enum SassError {
    /// A chain length or an accumulator count that is not `chainN`/`accN` or `N`, N >= 1.
    #[error("{word:?}: expected {prefix}N or N with N >= 1")]
    Count { word: String, prefix: &'static str },
    /// No `--results`, and no GPU run wrote the default file on this machine.
    #[error(
        "no results file at {}: a GPU run of the suite writes it (`cargo test --release --test probe`); \
         name another with --results FILE, such as a committed run under expectations/recorded/",
        file.display()
    )]
    NoRun { file: PathBuf },
    /// The results file could not be read.
    #[error(transparent)]
    Results(Error),
    #[error("{variant} is not in {}", file.shown())]
    NoVariant { variant: Variant, file: PathBuf },
    /// The variant is there without its SASS (with why, when the file says).
    #[error(
        "{} carries no SASS for {variant}{}",
        file.shown(),
        why.as_ref().map(|x| format!(" ({x})")).unwrap_or_default()
    )]
    NoSass {
        variant: Variant,
        file: PathBuf,
        why: Option<String>,
    },
}

impl From<SassError> for Failure {
    fn from(e: SassError) -> Failure {
        Failure::Message(e.to_string())
    }
}

fn count(word: &str, prefix: &'static str) -> Result<u32, SassError> {
    word.strip_prefix(prefix)
        .unwrap_or(word)
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SassError::Count {
            word: word.to_string(),
            prefix,
        })
}

/// Where `cargo xtask sass` reads without `--results`, in the workspace: what the suite's
/// GPU run writes.
pub const DEFAULT_RESULTS: &str = "target/accprobe/results.json";

/// Prints the loop of `chain`/`acc` from `results`, which `--results` named when `given`
/// (else it is [`DEFAULT_RESULTS`], which only a GPU run writes).
pub fn run(results: &Path, given: bool, chain: &str, acc: &str) -> Result<(), SassError> {
    let v = Variant::new(count(chain, "chain")?, count(acc, "acc")?);
    let absent = matches!(std::fs::symlink_metadata(results), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    if absent && !given {
        return Err(SassError::NoRun {
            file: results.to_path_buf(),
        });
    }
    let r = RunResults::load(results).map_err(SassError::Results)?;
    let vr = r.get(v).ok_or_else(|| SassError::NoVariant {
        variant: v,
        file: results.to_path_buf(),
    })?;
    let s = vr.sass.as_ref().ok_or_else(|| SassError::NoSass {
        variant: v,
        file: results.to_path_buf(),
        why: r.sass_unavailable.clone(),
    })?;
    if let Some(e) = &r.environment {
        say!("{v}: {}", e.summary());
    }
    say!(
        "loop: {} FFMAs, {} partials {:?}, destinations {}; digest {}",
        s.loop_ffma,
        s.loop_partials.len(),
        s.loop_partials,
        s.loop_ffma_destinations.join(" "),
        s.short_digest()
    );
    for line in loop_lines(s) {
        say!("{line}");
    }
    Ok(())
}

/// The loop as `cargo xtask sass` prints it: a line saying what the control fields are (or
/// why there are none), then each instruction with its control fields and partial, then the
/// loop's total stall.
fn loop_lines(s: &SassSummary) -> Vec<String> {
    let body = accprobe::compile::sass::from_lines(&s.loop_body);
    let width = s.loop_body.iter().map(|l| l.len()).max().unwrap_or(0);
    let mut out = vec![match (&s.schedule_digest, &s.schedule_unknown) {
        (Some(_), _) => "control fields: B<waits>:R<read>:W<write>:<Y yield>:S<stall>, scoreboards renumbered by first use in the loop".to_string(),
        (None, Some(why)) => why.shown(),
        (None, None) => "control fields: not in this results file".to_string(),
    }];
    for (i, (instr, chain)) in body
        .iter()
        .zip(accprobe::compile::sass::chain_of_each(&body))
        .enumerate()
    {
        let control = s.loop_control.get(i).map_or("", String::as_str);
        let partial = match chain {
            Some(c) => {
                let ops = instr.operands();
                format!("   # partial {c}: {} <- {}", ops[0], ops[1..].join(", "))
            }
            None => String::new(),
        };
        let line = format!("  {:width$}  {control:19}{partial}", instr.text);
        // One line of the listing, whatever the results file's instruction holds.
        out.push(line.trim_end().shown());
    }
    if let Some(t) = total_stall(&s.loop_control).filter(|_| !s.loop_control.is_empty()) {
        out.push(format!("total stall: {t} cycles per iteration"));
    }
    out
}

#[cfg(test)]
mod tests {
    //! On the committed results files, no GPU needed.
    use crate::sass;
    use crate::testing::committed;

    #[test]
    fn the_loop_shows_each_instructions_control_fields_and_the_total_stall() {
        let r = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let v = accprobe::model::variant::Variant::new(7, 1);
        let mut s = r.get(v).unwrap().sass.clone().unwrap();
        // The committed run predates the decoded schedule: it says so.
        assert_eq!(
            sass::loop_lines(&s)[0],
            "control fields: not in this results file"
        );
        s.loop_control = vec!["B------:R-:W-:Y:S04".to_string(); s.loop_body.len()];
        s.schedule_digest = Some("0".repeat(64));
        let lines = sass::loop_lines(&s);
        let ffma = lines.iter().find(|l| l.contains("FFMA")).unwrap();
        assert!(
            ffma.contains("B------:R-:W-:Y:S04") && ffma.contains("# partial 0"),
            "{lines:#?}"
        );
        assert_eq!(
            lines.last().unwrap(),
            &format!(
                "total stall: {} cycles per iteration",
                4 * s.loop_body.len()
            )
        );
    }

    #[test]
    fn sass_prints_from_the_committed_run_and_rejects_bad_names() {
        sass::run(&committed(), true, "chain29", "acc4").unwrap();
        sass::run(&committed(), true, "29", "4").unwrap();
        assert!(sass::run(&committed(), true, "chainX", "acc4")
            .unwrap_err()
            .to_string()
            .contains("expected chainN"));
        assert!(sass::run(&committed(), true, "chain30", "acc4")
            .unwrap_err()
            .to_string()
            .contains("is not in"));
    }
}
