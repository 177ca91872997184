//! Checks of the tree itself, as `cargo test` runs them: the toolbox a contributor builds
//! with. Every manifest states the same `rust-version`, and it is the oldest Rust that
//! builds the workspace: the highest `rust-version` of the locked dependencies, or of the
//! std APIs used, whichever is later (clippy's `incompatible_msrv`, which reads it, fails on
//! a std API newer than it). The pinned toolchain (`rust-toolchain.toml`) is at least that.

mod fn_length;

use crate::testing::root;
use std::path::Path;
use std::process::Command;

/// The Rust release whose std the crates need: `File::lock` and `File::try_lock` (the
/// device lock, the nextest run folder, bless), stable since 1.89.
const STD_NEEDS: Version = Version(1, 89, 0);

/// A Rust release, `1.89` being `1.89.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version(u32, u32, u32);

impl Version {
    fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().split('.').map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next().unwrap_or(Some(0))?;
        let patch = parts.next().unwrap_or(Some(0))?;
        parts
            .next()
            .is_none()
            .then_some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// `cargo metadata` of `manifest` with `args`, as JSON.
fn metadata(manifest: &Path, args: &[&str]) -> serde_json::Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata {}: {}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Each package of `meta` that its resolve holds (or every package, without one), with
/// its `rust-version` (`None` where it states none).
fn rust_versions(meta: &serde_json::Value) -> Vec<(String, Option<Version>)> {
    let resolved: Option<Vec<&str>> = meta["resolve"]["nodes"]
        .as_array()
        .map(|nodes| nodes.iter().filter_map(|n| n["id"].as_str()).collect());
    meta["packages"]
        .as_array()
        .expect("cargo metadata lists packages")
        .iter()
        .filter(|p| {
            resolved
                .as_ref()
                .is_none_or(|ids| ids.contains(&p["id"].as_str().unwrap_or("")))
        })
        .map(|p| {
            let name = format!("{} {}", p["name"], p["version"]).replace('"', "");
            (name, p["rust_version"].as_str().and_then(Version::parse))
        })
        .collect()
}

/// The triple this test was built for, as rustc names it.
fn host() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names its host")
        .to_string()
}

/// The `rust-version` of every manifest: the workspace's members and the fuzz workspace.
fn manifests_rust_versions() -> Vec<(String, Option<Version>)> {
    let mut all = rust_versions(&metadata(&root().join("Cargo.toml"), &["--no-deps"]));
    all.extend(rust_versions(&metadata(
        &root().join("fuzz/Cargo.toml"),
        &["--no-deps"],
    )));
    all
}

#[test]
fn every_manifest_states_one_rust_version() {
    let all = manifests_rust_versions();
    assert_eq!(
        all.len(),
        3,
        "accprobe, xtask and the fuzz targets: {all:?}"
    );
    let first = all[0].1;
    assert!(first.is_some(), "{all:?}");
    assert!(all.iter().all(|(_, v)| *v == first), "{all:?}");
}

#[test]
fn rust_version_is_the_locked_dependencies_highest_or_std_s() {
    let stated = manifests_rust_versions()[0].1.expect("a rust-version");
    let host = host();
    let locked = metadata(
        &root().join("Cargo.toml"),
        &["--locked", "--offline", "--filter-platform", &host],
    );
    let (dependency, highest) = rust_versions(&locked)
        .into_iter()
        .filter_map(|(name, v)| Some((name, v?)))
        .max_by_key(|(_, v)| *v)
        .expect("dependencies state a rust-version");
    let needed = highest.max(STD_NEEDS);
    assert_eq!(
        stated, needed,
        "rust-version is {stated}, but the oldest Rust that builds the workspace is {needed} \
         ({dependency} needs {highest}, std's APIs {STD_NEEDS}): set it in Cargo.toml's \
         [workspace.package] and in fuzz/Cargo.toml"
    );
}

#[test]
fn the_pinned_toolchain_is_a_release_no_older_than_rust_version() {
    let text = std::fs::read_to_string(root().join("rust-toolchain.toml")).unwrap();
    let channel = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel = "))
        .map(|c| c.trim_matches('"'))
        .expect("rust-toolchain.toml names a channel");
    let pinned = Version::parse(channel)
        .unwrap_or_else(|| panic!("channel {channel:?} is not a release (1.95.0): pin one"));
    let stated = manifests_rust_versions()[0].1.expect("a rust-version");
    assert!(
        pinned >= stated,
        "{pinned} is older than rust-version {stated}"
    );
    for component in ["clippy", "rustfmt"] {
        assert!(
            text.contains(&format!("\"{component}\"")),
            "{component}: {text}"
        );
    }
}

#[test]
fn versions_read_as_cargo_writes_them() {
    assert_eq!(Version::parse("1.89"), Some(Version(1, 89, 0)));
    assert_eq!(Version::parse("1.88.1"), Some(Version(1, 88, 1)));
    assert_eq!(Version::parse("stable"), None);
    assert_eq!(Version::parse("1.89.0.1"), None);
    assert!(Version(1, 90, 0) > Version(1, 89, 9));
}
