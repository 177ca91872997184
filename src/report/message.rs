//! A failure's one-line `message` attribute: the verdict and the head of its first
//! suspect, fitted to what the GitHub job summary shows, cut at a word.

use crate::text::line;
use crate::verdict::Failure;

/// The most characters of a `message` attribute: what the GitHub job-summary view shows.
pub const MESSAGE_CHARS: usize = 200;

/// What goes in the `message` attribute of a verdict's failure: its verdict and the head
/// of its first suspect (`message`).
pub fn failure_message(f: &Failure) -> String {
    viewed_message(f, |t| t.to_string())
}

/// [`failure_message`], each part through `view` before it is fitted.
pub(crate) fn viewed_message(f: &Failure, view: impl Fn(&str) -> String) -> String {
    let head = f.suspect.as_ref().map(|s| view(&s.head()));
    message(&view(&f.verdict), head.as_deref())
}

/// What goes in a `message` attribute: the first line of `verdict` and, when there is
/// one, the head of its first suspect, on one line, within [`MESSAGE_CHARS`]. The
/// suspect's head is kept whole; what does not fit is cut at a word, never inside one,
/// and marked `…`. The body holds the whole text.
pub(crate) fn message(verdict: &str, suspect: Option<&str>) -> String {
    let verdict = line(verdict.lines().next().unwrap_or("").trim_end());
    let suspect = suspect.map(|h| line(h.trim_end()));
    let Some(suspect) = suspect else {
        return fit(&verdict, MESSAGE_CHARS);
    };
    const SEP: &str = "; ";
    // The verdict keeps at least this much when a suspect's head is long.
    const VERDICT_AT_LEAST: usize = 80;
    let for_suspect = MESSAGE_CHARS - VERDICT_AT_LEAST - SEP.len();
    let left = MESSAGE_CHARS.saturating_sub(SEP.len() + chars(&verdict));
    let suspect = fit(&suspect, for_suspect.max(left));
    let verdict = fit(&verdict, MESSAGE_CHARS - SEP.len() - chars(&suspect));
    format!("{verdict}{SEP}{suspect}")
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `text` within `max` characters: whole when it fits, else cut after the last whole word
/// that fits with the `…` that marks the cut (inside a word only when one word alone is
/// longer than `max`).
pub(crate) fn fit(text: &str, max: usize) -> String {
    if chars(text) <= max {
        return text.to_string();
    }
    let room: String = text.chars().take(max.saturating_sub(1)).collect();
    let next = text.chars().nth(room.chars().count());
    let whole = match next {
        Some(c) if c.is_whitespace() => room.as_str(),
        _ => room
            .rfind(char::is_whitespace)
            .map_or(room.as_str(), |at| &room[..at]),
    };
    let kept = whole.trim_end_matches(|c: char| c.is_whitespace() || ",;:(—".contains(c));
    let kept = if kept.is_empty() { room.as_str() } else { kept };
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_verdict_and_its_suspect_whole_within_200_characters() {
        let suspect = crate::verdict::suspect::Suspect {
            who: crate::verdict::suspect::Who::Compiler,
            what: "SASS changed; options +--maxrregcount=16".into(),
            detail: "SASS digest of chain7_acc2_effective2 changed 0123456789ab.. → def4567890ab.."
                .into(),
        };
        let mut short =
            Failure::new("chain7_acc2_effective2: -1.75% vs baseline (±0.50%)").detail("more");
        short.suspect = Some(suspect.clone());
        assert_eq!(
            failure_message(&short),
            "chain7_acc2_effective2: -1.75% vs baseline (±0.50%); first suspect: the compiler \
             (SASS changed; options +--maxrregcount=16)"
        );
        let words = "slower than its baseline beyond tolerance ".repeat(8);
        let verdict = format!("chain7_acc2_effective2: {words}");
        let mut long = Failure::new(verdict.clone());
        long.suspect = Some(suspect);
        let m = failure_message(&long);
        assert!(
            m.chars().count() <= MESSAGE_CHARS,
            "{} chars: {m}",
            m.chars().count()
        );
        assert!(
            m.ends_with(
                "…; first suspect: the compiler (SASS changed; options +--maxrregcount=16)"
            ),
            "the suspect's head whole, the verdict cut: {m}"
        );
        let kept = m.split('…').next().unwrap();
        assert!(verdict.starts_with(kept), "{m}");
        let next = verdict[kept.len()..].chars().next().unwrap();
        assert!(next.is_whitespace(), "cut at a word, not inside one: {m}");
        // Without a suspect, the verdict alone, cut at a word.
        let alone = format!("v: {words}");
        let m = message(&alone, None);
        let kept = m.strip_suffix('…').unwrap();
        assert!(m.chars().count() <= MESSAGE_CHARS, "{m}");
        assert!(alone[kept.len()..].starts_with(' '), "{m}");
    }

    #[test]
    fn fit_cuts_at_a_word_and_inside_one_only_when_it_alone_is_too_long() {
        assert_eq!(fit("one two three", 13), "one two three");
        assert_eq!(fit("one two three", 12), "one two…");
        assert_eq!(fit("one two three", 8), "one two…");
        assert_eq!(fit("one two, three", 10), "one two…");
        assert_eq!(fit("abcdefghij", 5), "abcd…");
        assert_eq!(fit("éééé éé", 5), "éééé…");
    }
}
