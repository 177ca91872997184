//! `cargo xtask history runners`: the hosts of one GPU model that differ from the others,
//! on which variants, and the cases whose outcome differs by host.

use super::{failed, or_dash, runs, Filter, Tolerances};
use crate::Done;
use accprobe::history::{read, Run, Store, VariantRow};
use accprobe::model::median::median;
use std::collections::BTreeMap;
use std::path::Path;

/// For one GPU model: host -> variant -> that host's medians, and host -> case -> its
/// outcome in the host's latest run.
#[derive(Default)]
pub struct Fleet {
    pub medians: BTreeMap<String, BTreeMap<String, Vec<f64>>>,
    pub outcomes: BTreeMap<String, BTreeMap<String, String>>,
    pub profile: String,
}

/// The lines that say which host differs: a host's median of a variant more than its
/// tolerance from the median over hosts, and a case whose latest outcome is not every
/// host's.
pub fn differences(f: &Fleet, tol: &mut Tolerances) -> Vec<String> {
    let mut out = Vec::new();
    let mut per_variant: BTreeMap<&str, Vec<(&str, f64)>> = BTreeMap::new();
    for (host, variants) in &f.medians {
        for (v, m) in variants {
            let m = median(m.iter().copied()).unwrap_or(0.0);
            per_variant.entry(v).or_default().push((host, m));
        }
    }
    for (v, hosts) in &per_variant {
        if hosts.len() < 2 {
            continue;
        }
        let all: Vec<f64> = hosts.iter().map(|h| h.1).collect();
        let reference = median(all.iter().copied()).unwrap_or(0.0);
        let t = tol.of(&f.profile, v);
        for (host, m) in hosts {
            let d = m / reference - 1.0;
            if d.abs() > t {
                out.push(format!(
                    "{host}: {v} {m:.1} against the hosts' {reference:.1} ({:+.3}%, tolerance ±{:.2}%)",
                    d * 100.0,
                    t * 100.0
                ));
            }
        }
    }
    let mut per_case: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (host, cases) in &f.outcomes {
        for (c, o) in cases {
            per_case.entry(c).or_default().push((host, o));
        }
    }
    for (c, hosts) in per_case {
        if hosts.len() > 1 && hosts.iter().any(|h| h.1 != hosts[0].1) {
            let each: Vec<String> = hosts.iter().map(|(h, o)| format!("{h} {o}")).collect();
            out.push(format!("case {c}: {}", each.join(", ")));
        }
    }
    out
}

pub fn run(dir: &Path, s: &mut dyn Store, filter: &Filter) -> Done {
    let runs = runs(s, filter)?;
    let by_id: BTreeMap<&str, &Run> = runs.iter().map(|r| (r.id.as_str(), r)).collect();
    let variants: Vec<VariantRow> = read::variants(s, None).map_err(failed)?;
    let mut fleets: BTreeMap<String, Fleet> = BTreeMap::new();
    let fleet_of = |r: &Run| {
        format!(
            "{} ({}, {} mode)",
            or_dash(r.gpu_name.as_deref()),
            r.profile,
            r.mode
        )
    };
    for v in &variants {
        let Some(r) = by_id.get(v.run_id.as_str()) else {
            continue;
        };
        let f = fleets.entry(fleet_of(r)).or_default();
        f.profile = r.profile.clone();
        f.medians
            .entry(or_dash(r.host.as_deref()).to_string())
            .or_default()
            .entry(v.name.clone())
            .or_default()
            .push(v.median);
    }
    // Each host's latest run (runs are oldest first) gives its outcomes.
    for r in &runs {
        let record = read::record(s, r).map_err(failed)?;
        let f = fleets.entry(fleet_of(r)).or_default();
        let cases = record
            .cases
            .into_iter()
            .map(|c| (c.name, c.outcome))
            .collect();
        if !record.run.verdict.eq("unjudged") {
            f.outcomes
                .insert(or_dash(r.host.as_deref()).to_string(), cases);
        }
    }
    let mut tol = Tolerances::new(dir);
    for (name, f) in &fleets {
        let hosts: Vec<&str> = f.medians.keys().map(String::as_str).collect();
        say!("{name}: {} host(s): {}", hosts.len(), hosts.join(", "));
        if hosts.len() < 2 {
            say!("  one host: nothing to compare");
            continue;
        }
        let lines = differences(f, &mut tol);
        if lines.is_empty() {
            say!("  the hosts agree within tolerance");
        }
        for l in lines {
            say!("  {l}");
        }
    }
    Ok(())
}
