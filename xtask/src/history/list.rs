//! `cargo xtask history list`: the runs, oldest first.

use super::{or_dash, runs, short, Filter};
use crate::Done;
use accprobe::history::Store;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

pub fn run(s: &mut dyn Store, filter: &Filter) -> Done {
    let runs = runs(s, filter)?;
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED).set_header(vec![
        "run", "measured", "host", "GPU", "driver", "NVRTC", "profile", "mode", "verdict", "from",
    ]);
    for r in &runs {
        t.add_row(vec![
            short(&r.id),
            or_dash(r.measured_at.as_deref()),
            or_dash(r.host.as_deref()),
            or_dash(r.gpu_name.as_deref()),
            or_dash(r.driver.as_deref()),
            or_dash(r.nvrtc.as_deref()),
            &r.profile,
            &r.mode,
            &r.verdict,
            &r.origin,
        ]);
    }
    say!("{t}");
    say!("{} run(s) in {}", runs.len(), s.name());
    Ok(())
}
