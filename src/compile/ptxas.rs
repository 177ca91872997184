//! Part of stage 3 (compile): the ptxas verbose report, parsed per kernel.
//!
//! NVRTC with `--ptxas-options=--verbose` leaves lines like these in the program log:
//!
//! ```text
//! ptxas info    : Compiling entry function 'chain7_acc1_effective1' for 'sm_90'
//! ptxas info    : Function properties for chain7_acc1_effective1
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 10 registers, used 0 barriers, 392 bytes cmem[0]
//! ```

use std::collections::{BTreeMap, BTreeSet};

/// What ptxas reported for one entry function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PtxasReport {
    pub registers: u32,
    pub stack_frame_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
}

/// A line that could not be read.
pub type ParseError = crate::error::LineError;

#[derive(Default)]
struct Partial {
    properties: Option<(u32, u32, u32)>,
    registers: Option<u32>,
}

/// Parses every entry function's report. Each entry function must have both its properties
/// line and its `Used N registers` line; anything else in the log is passed over, including
/// the properties of device functions that are not entries (with `-G`, ptxas reports
/// `Function properties for clock64` with no register line of its own).
pub fn parse(log: &str) -> Result<BTreeMap<String, PtxasReport>, ParseError> {
    let mut found: BTreeMap<String, (usize, Partial)> = BTreeMap::new();
    let mut entries = BTreeSet::new();
    let mut current: Option<String> = None;
    for (i, line) in log.lines().enumerate() {
        let n = i + 1;
        let err = |message: String| ParseError {
            what: "ptxas log",
            line: n,
            message,
        };
        let text = line.trim();
        if let Some(rest) = text
            .strip_prefix("ptxas info")
            .map(|r| r.trim_start_matches([' ', ':']))
        {
            if let Some(r) = rest.strip_prefix("Compiling entry function '") {
                let name = r.split('\'').next().unwrap_or_default();
                if name.is_empty() || !r[name.len()..].starts_with('\'') {
                    return Err(err(format!("unterminated function name in {text:?}")));
                }
                current = Some(name.to_string());
                entries.insert(name.to_string());
                found
                    .entry(name.to_string())
                    .or_insert((n, Partial::default()));
            } else if let Some(name) = rest.strip_prefix("Function properties for ") {
                let name = name.trim();
                current = Some(name.to_string());
                found
                    .entry(name.to_string())
                    .or_insert((n, Partial::default()));
            } else if let Some(r) = rest.strip_prefix("Used ") {
                let regs = r
                    .split_whitespace()
                    .next()
                    .and_then(|w| w.parse::<u32>().ok())
                    .filter(|_| r.contains(" registers"))
                    .ok_or_else(|| err(format!("expected `Used N registers`, found {text:?}")))?;
                let name = current
                    .as_ref()
                    .ok_or_else(|| err("register count before any function name".into()))?;
                if let Some((_, p)) = found.get_mut(name) {
                    p.registers = Some(regs);
                }
            }
        } else if text.contains("bytes stack frame") {
            let name = current
                .as_ref()
                .ok_or_else(|| err("function properties before any function name".into()))?;
            let nums = properties(text).ok_or_else(|| {
                err(format!("expected `N bytes stack frame, N bytes spill stores, N bytes spill loads`, found {text:?}"))
            })?;
            if let Some((_, p)) = found.get_mut(name) {
                p.properties = Some(nums);
            }
        }
    }
    reports(found, &entries)
}

/// The report of every entry function `found` (each with its first line), refused where
/// one misses its properties or register line.
fn reports(
    found: BTreeMap<String, (usize, Partial)>,
    entries: &BTreeSet<String>,
) -> Result<BTreeMap<String, PtxasReport>, ParseError> {
    let mut out = BTreeMap::new();
    // Logs without `Compiling entry function` lines (older tools) name only entries.
    let is_entry = |name: &str| entries.is_empty() || entries.contains(name);
    for (name, (line, p)) in found.into_iter().filter(|(n, _)| is_entry(n)) {
        let missing = |what: &str| ParseError {
            what: "ptxas log",
            line,
            message: format!("function {name}: no {what} line (truncated log?)"),
        };
        let (stack, stores, loads) = p.properties.ok_or_else(|| missing("`bytes stack frame`"))?;
        let registers = p.registers.ok_or_else(|| missing("`Used N registers`"))?;
        out.insert(
            name,
            PtxasReport {
                registers,
                stack_frame_bytes: stack,
                spill_store_bytes: stores,
                spill_load_bytes: loads,
            },
        );
    }
    Ok(out)
}

/// `0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads` -> (0, 8, 8).
fn properties(text: &str) -> Option<(u32, u32, u32)> {
    let mut stack = None;
    let mut stores = None;
    let mut loads = None;
    for part in text.split(',') {
        let part = part.trim();
        let (num, what) = part.split_once(" bytes ")?;
        // NVRTC prefixes the line with `ptxas         .`; the count is the last word.
        let num: u32 = num.split_whitespace().last()?.parse().ok()?;
        match what.trim() {
            "stack frame" => stack = Some(num),
            "spill stores" => stores = Some(num),
            "spill loads" => loads = Some(num),
            _ => {}
        }
    }
    Some((stack?, stores?, loads?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_functions_without_a_register_line_are_passed_over() {
        // What `-G` (device debug) gives: a called device function reported with its
        // stack frame but no register count (as NVRTC 13.0 reports it for sm_90).
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for clock64
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'chain7_acc1_effective1' for 'sm_90'
ptxas info    : Function properties for chain7_acc1_effective1
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 1 barriers, 64 bytes cumulative stack size
";
        let r = parse(log).unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r["chain7_acc1_effective1"].registers, 30);
        assert_eq!(r["chain7_acc1_effective1"].stack_frame_bytes, 64);
        // An entry function that lacks its register line is still an error.
        let cut = log.replace(
            "ptxas info    : Used 30 registers, used 1 barriers, 64 bytes cumulative stack size\n",
            "",
        );
        assert!(parse(&cut)
            .unwrap_err()
            .message
            .contains("Used N registers"));
    }

    const LOG: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'chain7_acc1_effective1' for 'sm_90'
ptxas info    : Function properties for chain7_acc1_effective1
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 392 bytes cmem[0]
ptxas info    : Compiling entry function 'chain29_acc16_effective16' for 'sm_90'
ptxas info    : Function properties for chain29_acc16_effective16
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 392 bytes cmem[0]
";

    #[test]
    fn reads_each_function() {
        let r = parse(LOG).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r["chain7_acc1_effective1"],
            PtxasReport {
                registers: 10,
                ..Default::default()
            }
        );
        assert_eq!(
            r["chain29_acc16_effective16"],
            PtxasReport {
                registers: 40,
                stack_frame_bytes: 16,
                spill_store_bytes: 8,
                spill_load_bytes: 4
            }
        );
    }

    #[test]
    fn truncated_log_names_the_function_and_line() {
        let cut: String = LOG.lines().take(7).collect::<Vec<_>>().join("\n");
        let e = parse(&cut).unwrap_err();
        assert_eq!(e.line, 6, "{e}");
        assert!(e.message.contains("chain29_acc16_effective16"), "{e}");
    }

    #[test]
    fn malformed_numbers_are_errors_not_panics() {
        let bad = LOG.replace("Used 40 registers", "Used forty registers");
        assert_eq!(parse(&bad).unwrap_err().line, 9);
        let bad = LOG.replace("16 bytes stack frame", "-16 bytes stack frame");
        assert_eq!(parse(&bad).unwrap_err().line, 8);
        let bad = LOG.replace(
            "'chain7_acc1_effective1' for",
            "'chain7_acc1_effective1 for",
        );
        assert!(parse(&bad).is_err());
        assert_eq!(parse("").unwrap(), BTreeMap::new());
        assert!(
            parse("    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads").is_err()
        );
    }
}

#[cfg(test)]
mod recorded {
    /// The ptxas report NVRTC 13.0 gives for the H200 profile's matrix (sm_90).
    const H200: &str = include_str!("../../tests/data/h200/ptxas.log");

    #[test]
    fn reads_every_variant_of_the_h200_log() {
        let r = super::parse(H200).unwrap();
        assert_eq!(
            r.len(),
            129,
            "24 documented variants, 45 sink-isolation ones and 60 in contexts"
        );
        assert!(r.values().all(|x| x.registers >= 16));
        // Only 32 warps with 48 values live spill: 64 registers a thread do not hold acc8,
        // nor, with the phased start's counters, acc1 and acc2 at N = 7 and 13.
        let mut spilled: Vec<&str> = r
            .iter()
            .filter(|(_, x)| x.spill_store_bytes + x.spill_load_bytes > 0)
            .map(|(name, _)| name.as_str())
            .collect();
        spilled.sort();
        assert_eq!(
            spilled,
            [
                "chain13_acc1_effective1_w32_v48",
                "chain13_acc2_effective2_w32_v48",
                "chain13_acc8_effective8_w32_v48",
                "chain29_acc8_effective8_w32_v48",
                "chain7_acc1_effective1_w32_v48",
                "chain7_acc2_effective2_w32_v48",
                "chain7_acc8_effective7_w32_v48"
            ]
        );
    }
}
