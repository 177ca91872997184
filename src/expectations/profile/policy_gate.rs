//! A profile's `policy_gate:` section: a policy file or a policy program (docs/policies.md),
//! exactly one of the two, with the tolerance its picks are held to.

use super::file::PolicyGateFile;
use super::PolicyGate;
use crate::error::Result;
use crate::expectations::policy::{Policy, MAX_REGISTERS_PER_THREAD};
use crate::expectations::policy_source::{
    PolicyCommand, PolicySource, Program, DEFAULT_TIME_LIMIT, MAX_TIME_LIMIT_S,
};
use crate::expectations::yaml::{at, is_case_name, path_inside, referenced_from, CASE_NAME};
use crate::text::Shown;
use serde_saphyr::Spanned;
use std::path::Path;
use std::time::Duration;

/// The checked gate of `raw`, read in `file` (whose folder is `dir`), with its tolerance
/// already checked.
pub(super) fn read(
    file: &Path,
    dir: &Path,
    raw: &Spanned<PolicyGateFile>,
    tolerance: f64,
) -> Result<PolicyGate> {
    let g = &raw.value;
    let source = match (&g.file, &g.command) {
        (Some(f), None) => {
            for (set, key) in [
                (g.name.is_some(), "name"),
                (g.time_limit_s.is_some(), "time_limit_s"),
                (g.probe_context.is_some(), "probe_context"),
            ] {
                if set {
                    return Err(at(file, raw, format!("policy_gate.{key} is for a command: a policy file gives its own")));
                }
            }
            let path = path_inside(file, dir, "policy_gate.file", f)?;
            if !path.exists() {
                return Err(at(
                    file,
                    f,
                    format!("policy file {} does not exist", path.shown()),
                ));
            }
            PolicySource::File(Policy::load(&path).map_err(referenced_from(file, f))?)
        }
        (None, Some(c)) => PolicySource::Command(command(file, dir, raw, c)?),
        _ => {
            return Err(at(
                file,
                raw,
                "policy_gate: expected exactly one of file (a policy file) and command (a policy program)",
            ))
        }
    };
    Ok(PolicyGate { source, tolerance })
}

fn command(
    file: &Path,
    dir: &Path,
    raw: &Spanned<PolicyGateFile>,
    c: &Spanned<Vec<String>>,
) -> Result<PolicyCommand> {
    let g = &raw.value;
    let Some(first) = c.value.first() else {
        return Err(at(
            file,
            c,
            "policy_gate.command is empty: expected [program, arguments...]",
        ));
    };
    let program = if first.contains('/') {
        let s = Spanned::new(first.clone(), c.referenced, c.defined);
        Program::InFolder(path_inside(file, dir, "policy_gate.command's program", &s)?)
    } else if first.trim().is_empty() {
        return Err(at(file, c, "policy_gate.command's program is empty"));
    } else {
        Program::OnPath(first.clone())
    };
    let name = match &g.name {
        Some(n) if is_case_name(&n.value) => n.value.clone(),
        Some(n) => {
            return Err(at(
                file,
                n,
                format!("policy_gate.name {:?}: {CASE_NAME}", n.value),
            ))
        }
        None => {
            return Err(at(
                file,
                raw,
                "policy_gate.command needs a name (for its cases: policy::<name>::...)",
            ))
        }
    };
    let time_limit = match g.time_limit_s {
        None => DEFAULT_TIME_LIMIT,
        Some(s) if (1..=MAX_TIME_LIMIT_S).contains(&s) => Duration::from_secs(s),
        Some(s) => {
            return Err(at(
                file,
                raw,
                format!("policy_gate.time_limit_s {s}: expected 1 to {MAX_TIME_LIMIT_S} seconds"),
            ))
        }
    };
    let Some(probe_context) = &g.probe_context else {
        return Err(at(
            file,
            raw,
            "policy_gate.command needs a probe_context (the accumulation the probe kernel stands for)",
        ));
    };
    if probe_context.value.register_headroom > MAX_REGISTERS_PER_THREAD {
        return Err(at(
            file,
            probe_context,
            format!(
                "policy_gate.probe_context.register_headroom {} is above {MAX_REGISTERS_PER_THREAD}, the most registers a thread has",
                probe_context.value.register_headroom
            ),
        ));
    }
    Ok(PolicyCommand {
        name,
        program,
        args: c.value[1..].to_vec(),
        dir: dir.to_path_buf(),
        time_limit,
        probe_context: probe_context.value,
    })
}
