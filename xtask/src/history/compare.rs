//! `cargo xtask history compare A B`: what changed from one run to another.

use super::{failed, or_dash, short, Tolerances};
use crate::{Done, Failure};
use accprobe::history::{read, Run, RunRecord, Store};
use std::collections::BTreeMap;
use std::path::Path;

/// The run `spec` names among `runs` (oldest first): `last`, `last~N`, or a unique prefix
/// of its id.
pub fn find<'a>(runs: &'a [Run], spec: &str) -> Result<&'a Run, Failure> {
    if let Some(back) = spec.strip_prefix("last") {
        let n: usize = match back.strip_prefix('~') {
            Some(n) => n
                .parse()
                .map_err(|_| format!("{spec}: expected last or last~N"))?,
            None if back.is_empty() => 0,
            None => return Err(format!("{spec}: expected last or last~N").into()),
        };
        return runs
            .len()
            .checked_sub(n + 1)
            .map(|i| &runs[i])
            .ok_or_else(|| format!("{spec}: the history holds {} run(s)", runs.len()).into());
    }
    let found: Vec<&Run> = runs.iter().filter(|r| r.id.starts_with(spec)).collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("{spec}: no run has that id (`cargo xtask history list`)").into()),
        _ => Err(format!(
            "{spec}: {} runs have ids that start so: give more digits",
            found.len()
        )
        .into()),
    }
}

/// The fields of a run that say where and with what it ran, by name.
fn environment(r: &Run) -> Vec<(&'static str, String)> {
    let o = |x: &Option<String>| or_dash(x.as_deref()).to_string();
    vec![
        ("host", o(&r.host)),
        ("GPU", o(&r.gpu_name)),
        ("GPU UUID", o(&r.gpu_uuid)),
        ("PCI bus id", o(&r.pci_bus_id)),
        ("driver", o(&r.driver)),
        ("CUDA driver API", o(&r.cuda_driver_api)),
        ("NVRTC", o(&r.nvrtc)),
        ("libnvrtc", o(&r.nvrtc_library)),
        ("toolchain", o(&r.toolchain)),
        ("compile options", o(&r.compile_options)),
        ("checkout", o(&r.checkout_commit)),
        ("profile", r.profile.clone()),
        ("profile digest", o(&r.profile_digest)),
        ("mode", r.mode.clone()),
        ("verdict", r.verdict.clone()),
    ]
}

/// The lines that say what changed from `a` to `b`; tolerances from `tol`.
pub fn changes(a: &RunRecord, b: &RunRecord, tol: &mut Tolerances) -> Vec<String> {
    let mut out = Vec::new();
    for ((name, x), (_, y)) in environment(&a.run).into_iter().zip(environment(&b.run)) {
        if x != y {
            out.push(format!("{name}: {x} -> {y}"));
        }
    }
    let before: BTreeMap<&str, _> = a.variants.iter().map(|v| (v.name.as_str(), v)).collect();
    for v in &b.variants {
        let Some(u) = before.get(v.name.as_str()) else {
            out.push(format!("{}: only in {}", v.name, short(&b.run.id)));
            continue;
        };
        if u.sass_digest != v.sass_digest {
            out.push(format!("{}: SASS changed", v.name));
        } else if u.schedule_digest != v.schedule_digest {
            out.push(format!("{}: schedule changed (same instructions)", v.name));
        }
        let t = tol.of(&b.run.profile, &v.name);
        let d = v.median / u.median - 1.0;
        if d.abs() > t {
            out.push(format!(
                "{}: median {:.1} -> {:.1} ({:+.3}%, tolerance ±{:.2}%)",
                v.name,
                u.median,
                v.median,
                d * 100.0,
                t * 100.0
            ));
        }
        if (u.registers, u.spill_store_bytes) != (v.registers, v.spill_store_bytes) {
            out.push(format!(
                "{}: registers {:?} -> {:?}, spill stores {:?} -> {:?}",
                v.name, u.registers, v.registers, u.spill_store_bytes, v.spill_store_bytes
            ));
        }
    }
    let after: BTreeMap<&str, _> = b.variants.iter().map(|v| (v.name.as_str(), v)).collect();
    for u in a
        .variants
        .iter()
        .filter(|u| !after.contains_key(u.name.as_str()))
    {
        out.push(format!("{}: only in {}", u.name, short(&a.run.id)));
    }
    let outcome: BTreeMap<(&str, &str), &str> = a
        .cases
        .iter()
        .map(|c| ((c.suite.as_str(), c.name.as_str()), c.outcome.as_str()))
        .collect();
    for c in &b.cases {
        if let Some(&was) = outcome.get(&(c.suite.as_str(), c.name.as_str())) {
            if was != c.outcome {
                let suspect = c
                    .suspect
                    .as_deref()
                    .map_or(String::new(), |s| format!("; {s}"));
                out.push(format!("case {}: {was} -> {}{suspect}", c.name, c.outcome));
            }
        }
    }
    out
}

pub fn run(dir: &Path, s: &mut dyn Store, a: &str, b: &str) -> Done {
    let runs = read::runs(s).map_err(failed)?;
    let (ra, rb) = (find(&runs, a)?, find(&runs, b)?);
    let a = read::record(s, ra).map_err(failed)?;
    let b = read::record(s, rb).map_err(failed)?;
    say!(
        "{} ({}) -> {} ({})",
        short(&a.run.id),
        or_dash(a.run.measured_at.as_deref()),
        short(&b.run.id),
        or_dash(b.run.measured_at.as_deref())
    );
    let lines = changes(&a, &b, &mut Tolerances::new(dir));
    if lines.is_empty() {
        say!("nothing changed beyond tolerance");
    }
    for l in lines {
        say!("  {l}");
    }
    Ok(())
}
