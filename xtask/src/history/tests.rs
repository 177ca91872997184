//! The history commands on a store filled from the committed recorded runs, some of
//! them changed the way a regression, a runner or a step would change them.

use super::{compare, runners, Filter, Tolerances};
use accprobe::history::{self, read, About, Origin, RunRecord, Store};
use accprobe::model::results::RunResults;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn results() -> RunResults {
    RunResults::load(&root().join("expectations/recorded/h200-2026-11-30-wave.json")).unwrap()
}

/// The recorded run as run `i` on `host`, `variant`'s progress scaled by `scale`.
fn run_of(i: u64, host: &str, variant: &str, scale: f64) -> RunRecord {
    let mut r = results();
    if let Some(e) = r.environment.as_mut() {
        e.date = format!("2026-12-{:02}T{:02}:00:00Z", 1 + i / 24, i % 24);
    }
    let mut rec = history::build(
        &r,
        None,
        Origin::Import,
        About {
            host: Some(host.into()),
            ..About::default()
        },
    );
    for v in rec.variants.iter_mut().filter(|v| v.name == variant) {
        v.median *= scale;
    }
    rec
}

fn store(dir: &Path) -> Box<dyn Store> {
    Box::new(
        history::sqlite::SqliteStore::open(
            &dir.join("h.sqlite"),
            true,
            history::sqlite::BUSY_TIMEOUT,
        )
        .unwrap(),
    )
}

const V: &str = "chain13_acc2_effective2";

#[test]
fn compare_names_what_changed_and_runs_are_found_by_prefix_or_from_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = store(dir.path());
    let mut b = run_of(1, "h1", V, 0.98);
    b.run.driver = Some("590.1".into());
    b.variants[0].sass_digest = Some("other".into());
    for r in [run_of(0, "h1", V, 1.0), b] {
        s.insert(&r.rows()).unwrap();
    }
    let runs = read::runs(s.as_mut()).unwrap();
    assert_eq!(compare::find(&runs, "last").unwrap().id, runs[1].id);
    assert_eq!(compare::find(&runs, "last~1").unwrap().id, runs[0].id);
    assert_eq!(
        compare::find(&runs, &runs[0].id[..8]).unwrap().id,
        runs[0].id
    );
    assert!(compare::find(&runs, "last~2").is_err());
    assert!(compare::find(&runs, "zz").is_err());
    let a = read::record(s.as_mut(), &runs[0]).unwrap();
    let b = read::record(s.as_mut(), &runs[1]).unwrap();
    let lines = compare::changes(&a, &b, &mut Tolerances::new(&root().join("expectations")));
    let text = lines.join("\n");
    assert!(text.contains("driver: 580.159.04 -> 590.1"), "{text}");
    assert!(
        text.contains(&format!("{}: SASS changed", a.variants[0].name)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{V}: median")) && text.contains("-2.000%"),
        "{text}"
    );
    assert_eq!(lines.len(), 3, "nothing else changed: {text}");
}

#[test]
fn runners_names_the_host_that_differs_and_on_what() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = store(dir.path());
    for i in 0..3 {
        for (host, scale) in [("h1", 1.0), ("h2", 1.0), ("h3", 0.99)] {
            s.insert(&run_of(i * 3 + (host.as_bytes()[1] - b'0') as u64, host, V, scale).rows())
                .unwrap();
        }
    }
    let runs = super::runs(s.as_mut(), &Filter::default()).unwrap();
    let mut fleet = runners::Fleet {
        profile: "h200".into(),
        ..runners::Fleet::default()
    };
    for v in read::variants(s.as_mut(), None).unwrap() {
        let host = runs
            .iter()
            .find(|r| r.id == v.run_id)
            .unwrap()
            .host
            .clone()
            .unwrap();
        fleet
            .medians
            .entry(host)
            .or_default()
            .entry(v.name)
            .or_default()
            .push(v.median);
    }
    for (host, outcome) in [("h1", "passed"), ("h2", "passed"), ("h3", "failed")] {
        fleet
            .outcomes
            .entry(host.into())
            .or_default()
            .insert("policy::study::chain29_w16".into(), outcome.into());
        fleet
            .outcomes
            .entry(host.into())
            .or_default()
            .insert("probe::same".into(), "passed".into());
    }
    let lines = runners::differences(&fleet, &mut Tolerances::new(&root().join("expectations")));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("h3: {V}")) && lines[0].contains("-1.000%"),
        "{lines:?}"
    );
    assert_eq!(
        lines[1],
        "case policy::study::chain29_w16: h1 passed, h2 passed, h3 failed"
    );
}

#[test]
fn a_step_of_0_3_percent_in_the_history_is_one_change_at_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = store(dir.path());
    // 30 runs, the variant 0.3% faster from run 15 on; everything else steady.
    for i in 0..30 {
        let wiggle = 1.0 + 0.0002 * ((i * 7 % 5) as f64 - 2.0);
        let step = if i >= 15 { 1.003 } else { 1.0 };
        s.insert(&run_of(i, "h1", V, wiggle * step).rows()).unwrap();
    }
    let runs = super::runs(s.as_mut(), &Filter::default()).unwrap();
    let series: Vec<f64> = runs
        .iter()
        .map(|r| {
            read::record(s.as_mut(), r)
                .unwrap()
                .variants
                .into_iter()
                .find(|v| v.name == V)
                .unwrap()
                .median
        })
        .collect();
    let found = history::changes::changes(&series, &history::changes::Method::default());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].at, 15);
    let those: Vec<&history::Run> = runs.iter().collect();
    let line = super::changes::describe(V, &found[0], &those);
    assert!((0.002..0.004).contains(&found[0].shift), "{found:?}");
    assert!(
        line.contains(&format!("from run {}", &runs[15].id[..12])),
        "{line}"
    );
    assert!(
        line.contains("no driver, NVRTC, host or checkout change"),
        "{line}"
    );
    // The steady variants have none.
    let other: Vec<f64> = runs
        .iter()
        .map(|r| read::record(s.as_mut(), r).unwrap().variants[0].median)
        .collect();
    assert!(history::changes::changes(&other, &history::changes::Method::default()).is_empty());
}

#[test]
fn a_trend_chart_is_drawn_with_its_band_and_a_series_per_toolchain() {
    let mut runs: Vec<history::Run> = (0..4).map(|i| run_of(i, "h1", V, 1.0).run).collect();
    runs[3].driver = Some("590.1".into());
    let points: Vec<super::trend::Point> = runs
        .iter()
        .enumerate()
        .map(|(index, run)| super::trend::Point {
            index,
            median: 144_926.0,
            run,
        })
        .collect();
    let mut svg = String::new();
    super::trend::chart(&mut svg, V, &points, Some((144_926.0, 0.005))).unwrap();
    for text in [
        "tolerance ±0.50%",
        "baseline 144926.0",
        "driver 580.159.04 / NVRTC 13.0",
        "driver 590.1 / NVRTC 13.0",
    ] {
        assert!(svg.contains(text), "{text} not in the chart");
    }
}
