//! `cargo xtask history changes`: change points per variant over time, per GPU model,
//! profile and mode (a series mixes no two of them), by the Mann-Whitney window test.

use super::{failed, or_dash, runs, short, Filter};
use crate::Done;
use accprobe::history::changes::{changes, Method};
use accprobe::history::{read, Run, Store};
use std::collections::BTreeMap;

/// One change, in words: the variant, where its level moved, by how much, and what else
/// changed at that run.
pub fn describe(variant: &str, c: &accprobe::history::changes::Change, runs: &[&Run]) -> String {
    let at = runs[c.at];
    let before = runs[c.at - 1];
    let mut what = Vec::new();
    for (name, x, y) in [
        ("driver", &before.driver, &at.driver),
        ("NVRTC", &before.nvrtc, &at.nvrtc),
        ("host", &before.host, &at.host),
        ("checkout", &before.checkout_commit, &at.checkout_commit),
    ] {
        if x != y {
            what.push(format!(
                "{name} {} -> {}",
                or_dash(x.as_deref()),
                or_dash(y.as_deref())
            ));
        }
    }
    let with = if what.is_empty() {
        "no driver, NVRTC, host or checkout change at that run".to_string()
    } else {
        what.join(", ")
    };
    format!(
        "{variant}: from run {} ({}) on, {:.1} -> {:.1} ({:+.3}%, p = {:.2e}); {with}",
        short(&at.id),
        or_dash(at.measured_at.as_deref()),
        c.before,
        c.after,
        c.shift * 100.0,
        c.p
    )
}

pub fn run(s: &mut dyn Store, filter: &Filter, only: Option<&str>, m: &Method) -> Done {
    let runs = runs(s, filter)?;
    let order: BTreeMap<&str, usize> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect();
    // (GPU, profile, mode) -> variant -> (run index, median), in run order.
    let mut series: BTreeMap<String, BTreeMap<String, Vec<(usize, f64)>>> = BTreeMap::new();
    for v in read::variants(s, only).map_err(failed)? {
        let Some(&i) = order.get(v.run_id.as_str()) else {
            continue;
        };
        let r = &runs[i];
        let key = format!(
            "{} / profile {} / {} mode",
            or_dash(r.gpu_name.as_deref()),
            r.profile,
            r.mode
        );
        series
            .entry(key)
            .or_default()
            .entry(v.name)
            .or_default()
            .push((i, v.median));
    }
    say!(
        "method: Mann-Whitney window test (window {} runs, alpha {}, min shift {:.2}%)",
        m.window,
        m.alpha,
        m.min_shift * 100.0
    );
    let mut found = 0;
    for (key, variants) in &series {
        let n = variants.values().map(Vec::len).max().unwrap_or(0);
        say!("{key}: {} variant(s), up to {n} run(s)", variants.len());
        for (name, points) in variants {
            let mut points = points.clone();
            points.sort_by_key(|p| p.0);
            let medians: Vec<f64> = points.iter().map(|p| p.1).collect();
            let those: Vec<&Run> = points.iter().map(|p| &runs[p.0]).collect();
            for c in changes(&medians, m) {
                found += 1;
                say!("  {}", describe(name, &c, &those));
            }
        }
    }
    say!("{found} change(s)");
    Ok(())
}
