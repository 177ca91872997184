//! The commands that run the probe on a GPU: `probe`, `agree` and `bench`.

use crate::paths::workspace;
use crate::progress;
use accprobe::catalog;
use accprobe::measure::device;
use accprobe::measure::session::GpuSession;
use accprobe::measure::target::{CudaTarget, Target};
use accprobe::model::results::RunResults;
use accprobe::model::settings::Mode;
use accprobe::output::write_atomic;
use accprobe::report;
use accprobe::text::Shown;
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A session on the GPU found, with the profile `name` (or the one that matches the GPU).
fn session(
    dir: &Path,
    name: Option<&str>,
    mode: Option<Mode>,
    cache: Option<PathBuf>,
) -> Result<GpuSession, crate::Failure> {
    let device = device::detect()?;
    let (profiles, errors) = catalog::load_dir(dir);
    if let Some(e) = errors.first() {
        return Err(format!("{e}").into());
    }
    let forced = match name {
        Some(n) => Some(n.to_string()),
        None => accprobe::config::profile().map_err(accprobe::error::GpuError::from)?,
    };
    let sel = catalog::select(&profiles, Some(&device.identity), forced.as_deref())
        .map_err(|e| e.to_string())?;
    Ok(session_on(device, sel.profile, sel.why, cache).in_mode(mode))
}

/// A session with `profile` on `device`, saying why that profile.
pub fn session_on(
    device: device::Device,
    profile: accprobe::expectations::profile::Profile,
    why: String,
    cache: Option<PathBuf>,
) -> GpuSession {
    warn!("accprobe: {why}");
    let target: Arc<dyn Target> = Arc::new(CudaTarget::new(device, cache));
    GpuSession::new(profile, why, Ok(target))
}

pub fn default_cache() -> PathBuf {
    // Without a workspace (`--expectations` given elsewhere) the cache goes under the
    // working directory.
    workspace()
        .unwrap_or_default()
        .join("target/accprobe/cache")
}

/// Why a JSON output was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteJsonError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("cannot write {}: {source}", path.shown())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<WriteJsonError> for crate::Failure {
    fn from(e: WriteJsonError) -> crate::Failure {
        crate::Failure::Message(e.to_string())
    }
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), WriteJsonError> {
    let text = serde_json::to_string_pretty(value)?;
    write_atomic(path, &text).map_err(|source| WriteJsonError::Write {
        path: path.to_path_buf(),
        source,
    })
}

pub fn env_line(r: &RunResults) -> String {
    match &r.environment {
        Some(e) => e.summary(),
        None => "no environment".into(),
    }
}

/// `cargo xtask probe`: the whole matrix, the study's table, a results file.
pub fn probe(dir: &Path, name: Option<&str>, mode: Option<Mode>, out: &Path) -> crate::Done {
    let s = session(dir, name, mode, Some(default_cache()))?;
    let bar = progress::steps(1);
    bar.set_message(format!(
        "compiling and measuring {} variants ({:?} mode)",
        s.profile.probe.variants().len(),
        s.mode()
    ));
    let r = s.measure_all();
    bar.finish_and_clear();
    let r = r?;
    say!("{}\n", env_line(&r));
    say!(
        "{}",
        report::table(&r, &s.profile.probe.chains, &s.profile.probe.accumulators)
    );
    if !s.profile.probe.sink_modes.is_empty() {
        say!("{}", report::sink_tables(&r, &s.profile.probe));
    }
    if let Some(t) = &r.timings {
        say!(
            "compile {:.3} s (cache {}), GPU phase {:.3} s ({:?})",
            t.compile_s,
            t.compile_cache,
            t.gpu_s,
            r.mode
        );
    }
    write_atomic(out, &r.to_json()).map_err(|e| format!("cannot write {}: {e}", out.shown()))?;
    say!("results: {}", out.shown());
    crate::history::record_probe(&s, &r)
}

#[derive(Serialize)]
struct Agreement {
    profile: String,
    environment: String,
    tolerance: f64,
    /// Per variant: (name, serial median, wave median, relative difference of medians,
    /// relative difference of means).
    variants: Vec<(String, f64, f64, f64, f64)>,
    distinct_sms_per_wave: Vec<usize>,
    accepted: bool,
}

/// `cargo xtask agree`: serial and wave on the same matrix, per-variant differences.
pub fn agree(dir: &Path, name: Option<&str>, tolerance: f64, out: &Path) -> crate::Done {
    let bar = progress::steps(2);
    let measured = (|| -> Result<(RunResults, RunResults), crate::Failure> {
        bar.set_message("serial run");
        let serial =
            session(dir, name, Some(Mode::Serial), Some(default_cache()))?.measure_all()?;
        bar.inc(1);
        bar.set_message("wave run");
        let wave = session(dir, name, Some(Mode::Wave), Some(default_cache()))?.measure_all()?;
        Ok((serial, wave))
    })();
    bar.finish_and_clear();
    let (serial, wave) = measured?;
    let agreement = accprobe::onboard::mode::compare(&serial, &wave, tolerance)?;
    let rows: Vec<(String, f64, f64, f64, f64)> = agreement
        .rows
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                r.serial_median,
                r.wave_median,
                r.median_difference,
                r.mean_difference,
            )
        })
        .collect();
    let sms = distinct_sms_per_wave(&wave);
    let worst = agreement.worst;
    let accepted = agreement.accepted();
    say!("{}\n", env_line(&serial));
    say!("{}", agreement_table(&rows, tolerance));
    say!(
        "\nworst difference of medians {:.4}% (tolerance {:.2}%); distinct SMs per wave {:?} for {} variants: wave mode {}",
        worst * 100.0,
        tolerance * 100.0,
        sms,
        wave.variants.len(),
        if accepted { "ACCEPTED" } else { "NOT accepted" }
    );
    if let Some((name, d)) = &agreement.worst_context {
        say!(
            "the other contexts' variants are not judged (they move between modes and runs): worst difference {:.3}% ({name})",
            d * 100.0
        );
    }
    write_json(
        out,
        &Agreement {
            profile: serial.profile.clone(),
            environment: env_line(&serial),
            tolerance,
            variants: rows,
            distinct_sms_per_wave: sms,
            accepted,
        },
    )?;
    say!("agreement: {}", out.shown());
    accepted.then_some(()).ok_or(crate::Failure::Printed)
}

/// The per-variant comparison for the terminal (comfy-table: aligned columns whatever the
/// widths, instead of hand-counted format widths).
fn agreement_table(rows: &[(String, f64, f64, f64, f64)], tolerance: f64) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED).set_header(vec![
        "variant",
        "serial median",
        "wave median",
        "d(median)",
        "d(mean)",
        "",
    ]);
    for (n, s, w, dm, dmean) in rows {
        t.add_row(vec![
            n.clone(),
            format!("{s:.1}"),
            format!("{w:.1}"),
            format!("{:.3}%", dm * 100.0),
            format!("{:.3}%", dmean * 100.0),
            if *dm > tolerance {
                "over tolerance".into()
            } else {
                String::new()
            },
        ]);
    }
    for c in 1..5 {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// For each counted wave, how many distinct SMs its variants' first blocks ran on.
pub fn distinct_sms_per_wave(r: &RunResults) -> Vec<usize> {
    let waves = r.variants.iter().map(|v| v.sm_ids.len()).min().unwrap_or(0);
    (0..waves)
        .map(|k| {
            let mut ids: Vec<u32> = r
                .variants
                .iter()
                .filter_map(|v| v.sm_ids[k].first().copied())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        })
        .collect()
}

#[derive(Serialize)]
struct BenchRun {
    cold_compile_s: f64,
    cold_nvrtc_s: f64,
    cold_sass_s: f64,
    cached_compile_s: f64,
    cached_cache: String,
    serial_gpu_s: f64,
    wave_gpu_s: f64,
    wave_distinct_sms: Vec<usize>,
}

#[derive(Serialize)]
struct Bench {
    profile: String,
    environment: String,
    variants: usize,
    launches_per_variant: u32,
    budget_cycles: u64,
    sm_clock_mhz: f64,
    serial_floor_s: f64,
    wave_floor_s: f64,
    runs: Vec<BenchRun>,
    median_serial_gpu_s: f64,
    median_wave_gpu_s: f64,
    median_cold_compile_s: f64,
    median_cached_compile_s: f64,
}

/// The median of `values`, NaN (null in the JSON) for none.
fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    accprobe::model::median::median(values).unwrap_or(f64::NAN)
}

/// The GPU phase's floors, seconds, of `n` variants of `blocks` blocks each, `launches`
/// launches of `per_launch` seconds each, on `sms` SMs: serially one launch after another;
/// as waves, one launch time per wave, as many waves per launch as `wave_plan` makes of
/// the variants (every context's variants included: a matrix past the SM count, or past
/// the 128 kernels a GPU runs at once, takes two; each kernel measured alone one more).
fn floors(
    vs: &[accprobe::model::variant::Variant],
    blocks: u32,
    sms: u32,
    launches: u32,
    per_launch: f64,
) -> (f64, f64) {
    let n = vs.len();
    let ordered: Vec<_> = accprobe::measure::wave_order(vs)
        .into_iter()
        .map(|i| vs[i])
        .collect();
    let waves = accprobe::measure::wave_plan(&ordered, blocks, sms).len();
    (
        n as f64 * launches as f64 * per_launch,
        waves as f64 * launches as f64 * per_launch,
    )
}

impl BenchRun {
    /// The run's line (`i` from 0).
    fn say(&self, i: usize) {
        warn!(
            "run {}: cold compile {:.3} s (NVRTC {:.3}, SASS {:.3}), cached {:.3} s ({}), serial GPU {:.3} s, wave GPU {:.3} s",
            i + 1,
            self.cold_compile_s,
            self.cold_nvrtc_s,
            self.cold_sass_s,
            self.cached_compile_s,
            self.cached_cache,
            self.serial_gpu_s,
            self.wave_gpu_s
        );
    }
}

impl Bench {
    /// The figures against their floors, as a Markdown table.
    fn say(&self) {
        say!("{}\n", self.environment);
        say!(
            "profile {} ({} variants, {} launches each, {} cycles, floor at {:.0} MHz)",
            self.profile,
            self.variants,
            self.launches_per_variant,
            self.budget_cycles,
            self.sm_clock_mhz
        );
        say!(
            "| what | median of {} runs | floor | ratio |",
            self.runs.len()
        );
        say!("| --- | --- | --- | --- |");
        say!(
            "| serial GPU phase | {:.4} s | {:.4} s | {:.3} |",
            self.median_serial_gpu_s,
            self.serial_floor_s,
            self.median_serial_gpu_s / self.serial_floor_s
        );
        say!(
            "| wave GPU phase | {:.4} s | {:.4} s | {:.3} |",
            self.median_wave_gpu_s,
            self.wave_floor_s,
            self.median_wave_gpu_s / self.wave_floor_s
        );
        say!(
            "| cold compile (NVRTC + SASS) | {:.4} s | | |",
            self.median_cold_compile_s
        );
        say!(
            "| cached compile | {:.4} s | | |",
            self.median_cached_compile_s
        );
    }
}

/// `cargo xtask bench`: GPU phase of each mode against its floor, compile cold and cached,
/// medians of `runs` runs.
pub fn bench(dir: &Path, name: &str, runs: usize, out: &Path) -> crate::Done {
    let cache = std::env::temp_dir().join(format!("accprobe-bench-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let mut rows = Vec::new();
    let mut last = None;
    let runs = runs.max(1);
    // Per run: a cold serial and a cached wave measurement; one more fills the cache.
    let bar = progress::steps(2 * runs as u64 + 1);
    let measured = (|| -> Result<(), crate::Failure> {
        for i in 0..runs {
            // Cold: no cache at all; this session also measures serially.
            bar.set_message(format!("run {}/{runs}: cold compile, serial", i + 1));
            let cold = session(dir, Some(name), Some(Mode::Serial), None)?;
            let rs = cold.measure_all()?;
            bar.inc(1);
            let tc = rs.timings.clone().ok_or("no timings")?;
            // Cached: the first of these fills the cache, the rest hit it; measured as a wave.
            if i == 0 {
                bar.set_message("filling the compile cache");
                session(dir, Some(name), Some(Mode::Wave), Some(cache.clone()))?.measure_all()?;
                bar.inc(1);
            }
            bar.set_message(format!("run {}/{runs}: cached compile, wave", i + 1));
            let warm = session(dir, Some(name), Some(Mode::Wave), Some(cache.clone()))?;
            let rw = warm.measure_all()?;
            bar.inc(1);
            let tw = rw.timings.clone().ok_or("no timings")?;
            let row = BenchRun {
                cold_compile_s: tc.compile_s,
                cold_nvrtc_s: tc.nvrtc_s,
                cold_sass_s: tc.sass_s,
                cached_compile_s: tw.compile_s,
                cached_cache: tw.compile_cache.clone(),
                serial_gpu_s: tc.gpu_s,
                wave_gpu_s: tw.gpu_s,
                wave_distinct_sms: distinct_sms_per_wave(&rw),
            };
            // One line per run, in logs too; above the bar on a terminal.
            bar.suspend(|| row.say(i));
            rows.push(row);
            last = Some((cold.profile.clone(), rs));
        }
        Ok(())
    })();
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&cache);
    measured?;
    let (p, r) = last.ok_or("no run")?;
    let clock = r
        .environment
        .as_ref()
        .and_then(|e| e.sm_clock_rated_mhz)
        .ok_or("no SM clock")?;
    let launches = p.probe.launches();
    let variants = p.probe.variants();
    let per_launch = p.probe.budget_cycles as f64 / (clock * 1e6);
    let sms = r.environment.as_ref().map_or(0, |e| e.sm_count);
    let (serial_floor_s, wave_floor_s) =
        floors(&variants, p.probe.blocks, sms, launches, per_launch);
    let b = Bench {
        profile: p.name.clone(),
        environment: env_line(&r),
        variants: variants.len(),
        launches_per_variant: launches,
        budget_cycles: p.probe.budget_cycles,
        sm_clock_mhz: clock,
        serial_floor_s,
        wave_floor_s,
        median_serial_gpu_s: median(rows.iter().map(|x| x.serial_gpu_s)),
        median_wave_gpu_s: median(rows.iter().map(|x| x.wave_gpu_s)),
        median_cold_compile_s: median(rows.iter().map(|x| x.cold_compile_s)),
        median_cached_compile_s: median(rows.iter().map(|x| x.cached_compile_s)),
        runs: rows,
    };
    b.say();
    write_json(out, &b)?;
    say!("bench: {}", out.shown());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wave_floor_counts_the_waves_the_matrix_takes() {
        use accprobe::model::variant::{Variant, Workload};
        let probe = |n: usize| vec![Variant::new(7, 1); n];
        // 128 one-block variants fit one wave of an H200's 132 SMs; 129 take two, since
        // the GPU runs at most 128 kernels at once.
        assert_eq!(
            floors(&probe(128), 1, 132, 11, 0.005),
            (128.0 * 11.0 * 0.005, 11.0 * 0.005)
        );
        assert_eq!(floors(&probe(129), 1, 132, 11, 0.005).1, 2.0 * 11.0 * 0.005);
        assert_eq!(floors(&probe(133), 1, 132, 11, 0.005).1, 2.0 * 11.0 * 0.005);
        assert_eq!(floors(&probe(69), 2, 132, 11, 0.005).1, 2.0 * 11.0 * 0.005);
        // Each GEMV is measured alone: one more launch time each, wherever it is listed.
        let mut vs = probe(10);
        vs.insert(3, Variant::reduction(Workload::Gemv, 1));
        vs.push(Variant::reduction(Workload::Gemv, 2));
        vs.push(Variant::reduction(Workload::Dot, 2));
        assert_eq!(floors(&vs, 1, 132, 11, 0.005).1, 3.0 * 11.0 * 0.005);
    }

    #[test]
    fn the_agreement_table_aligns_columns_and_flags_what_is_over_tolerance() {
        let rows = vec![
            (
                "chain7_acc1_effective1".to_string(),
                147058.0,
                147058.0,
                0.0,
                0.0001,
            ),
            (
                "chain29_acc16_effective16".to_string(),
                84033.5,
                83000.0,
                0.0123,
                0.011,
            ),
        ];
        let text = agreement_table(&rows, 0.005).to_string();
        let lines: Vec<&str> = text.lines().collect();
        let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{text}");
        let row = |name: &str| *lines.iter().find(|l| l.contains(name)).unwrap();
        assert!(row("chain29_acc16").contains("1.230%"), "{text}");
        assert!(row("chain29_acc16").contains("over tolerance"), "{text}");
        assert!(!row("chain7_acc1").contains("over tolerance"), "{text}");
        // Numbers right-aligned: each wave median ends at its cell's right edge.
        let wave = |name: &str| row(name).split('┆').nth(2).unwrap().to_string();
        assert!(wave("chain7_acc1").ends_with(" 147058.0 "), "{text}");
        assert!(wave("chain29_acc16").ends_with("  83000.0 "), "{text}");
    }
}
