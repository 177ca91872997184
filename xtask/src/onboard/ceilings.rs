//! `cargo xtask ceilings`: the GPU's physical ceilings measured and printed against the
//! validity of the profile that matches it.

use crate::gpu::{session_on, write_json};
use accprobe::catalog;
use accprobe::measure::device;
use accprobe::onboard;
use std::path::Path;

/// `cargo xtask ceilings`: measures and prints the ceilings, against the validity of the
/// profile that matches the GPU; writes them as JSON to `out`.
pub fn ceilings(dir: &Path, out: &Path) -> crate::Done {
    let device = device::detect()?;
    let (profiles, errors) = catalog::load_dir(dir);
    if let Some(e) = errors.first() {
        return Err(e.to_string().into());
    }
    let sel =
        catalog::select(&profiles, Some(&device.identity), None).map_err(|e| e.to_string())?;
    let profile = sel.profile.clone();
    let s = session_on(device, sel.profile, sel.why, None);
    let c = s.measure_ceilings()?;
    say!("{}", c.summary());
    let v = onboard::ceilings::validity(&c, 0.05)?;
    say!(
        "as a profile's validity: ffma_latency_cycles {}, schedulers_per_sm {}",
        v.ffma_latency_cycles,
        v.schedulers_per_sm
    );
    say!("{}", onboard::ceilings::against_published(&c, &v));
    match profile.validity {
        Some(t) => say!(
            "profile {:?} ({}) states ffma_latency_cycles {}, schedulers_per_sm {}: {}",
            profile.name,
            profile.file.display(),
            t.ffma_latency_cycles,
            t.schedulers_per_sm,
            if (t.ffma_latency_cycles, t.schedulers_per_sm)
                == (v.ffma_latency_cycles, v.schedulers_per_sm)
            {
                "the same"
            } else {
                "DIFFERENT"
            }
        ),
        None => say!("profile {:?} states no validity", profile.name),
    }
    write_json(out, &c)?;
    say!("ceilings: {}", out.display());
    Ok(())
}
