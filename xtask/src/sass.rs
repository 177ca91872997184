//! `cargo xtask sass`: a variant's SASS loop body from a results file, each FFMA marked
//! with the partial accumulator (dependency chain) it extends.

use accprobe::model::results::RunResults;
use std::path::Path;

fn count(word: &str, prefix: &str) -> Result<u32, String> {
    word.strip_prefix(prefix)
        .unwrap_or(word)
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{word:?}: expected {prefix}N or N with N >= 1"))
}

pub fn run(results: &Path, chain: &str, acc: &str) -> Result<(), String> {
    let v = accprobe::model::variant::Variant::new(count(chain, "chain")?, count(acc, "acc")?);
    let r = RunResults::load(results).map_err(|e| e.to_string())?;
    let vr = r
        .get(v)
        .ok_or_else(|| format!("{v} is not in {}", results.display()))?;
    let s = vr.sass.as_ref().ok_or_else(|| {
        format!(
            "{} carries no SASS for {v}{}",
            results.display(),
            r.sass_unavailable
                .as_ref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        )
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
    let body = accprobe::compile::sass::from_lines(&s.loop_body);
    let width = s.loop_body.iter().map(|l| l.len()).max().unwrap_or(0);
    for (instr, chain) in body
        .iter()
        .zip(accprobe::compile::sass::chain_of_each(&body))
    {
        match chain {
            Some(c) => {
                let ops = instr.operands();
                say!(
                    "  {:width$}   # partial {c}: {} <- {}",
                    instr.text,
                    ops[0],
                    ops[1..].join(", ")
                );
            }
            None => say!("  {}", instr.text),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! On the committed results files, no GPU needed.
    use crate::sass;
    use crate::testing::committed;

    #[test]
    fn sass_prints_from_the_committed_run_and_rejects_bad_names() {
        sass::run(&committed(), "chain29", "acc4").unwrap();
        sass::run(&committed(), "29", "4").unwrap();
        assert!(sass::run(&committed(), "chainX", "acc4")
            .unwrap_err()
            .contains("expected chainN"));
        assert!(sass::run(&committed(), "chain30", "acc4")
            .unwrap_err()
            .contains("is not in"));
    }
}
