//! The one way a generated file of a profile (baselines, a draft profile, compile-only
//! digests) is written: under the profile folder's lock, never over a change made since
//! its diff was shown, never outside the profile's folder, never under CI.

use crate::config::{ci_variable, CI_VARIABLES};
use crate::error::{Error, Result};
use crate::output::write_atomic;
use crate::text::Shown;
use std::path::Path;

/// Writes `contents` (`what`: "baselines") to `file`, a generated file of the profile in
/// `folder`, whose diff was made against the file with digest `before`; the one way every
/// bless writes. Under an exclusive lock on the profile's folder, so that two blesses of
/// one profile take turns, it re-reads the file and
/// - writes nothing when the file already holds `contents` (even under CI);
/// - refuses when the file changed since `before`: another bless (or an edit) wrote it
///   meanwhile, and writing would silently replace that change and contradict the diff
///   shown; run bless again to see the diff against the file as it is now;
/// - refuses under CI;
/// - else writes atomically.
///
/// Before any of that, a `file` that really (through a symlink) lies outside `folder` is
/// refused, neither read nor written.
pub fn write_generated(
    folder: &Path,
    file: &Path,
    before: Option<&str>,
    contents: &str,
    what: &str,
) -> Result<()> {
    write_generated_unless_ci(
        |name| std::env::var(name).ok(),
        folder,
        file,
        before,
        contents,
        what,
    )
}

/// [`write_generated`] with the environment read through `var` for the CI refusal
/// ([`refuse_if_ci`]), so that a caller that was handed its environment (onboarding, its
/// tests under CI) decides with the same one throughout.
pub fn write_generated_unless_ci(
    var: impl Fn(&str) -> Option<String>,
    folder: &Path,
    file: &Path,
    before: Option<&str>,
    contents: &str,
    what: &str,
) -> Result<()> {
    let real_folder = folder
        .canonicalize()
        .map_err(|e| Error::io(folder, "open the profile's folder", e))?;
    let lock = std::fs::File::open(&real_folder)
        .map_err(|e| Error::io(&real_folder, "open the profile's folder", e))?;
    lock.lock()
        .map_err(|e| Error::io(&real_folder, "lock the profile's folder", e))?;
    // Before the file is even read: a link out of the folder is neither read nor written.
    if let Err(real) = crate::input::confined(&real_folder, file) {
        return Err(Error::in_file(
            file,
            format!(
                "not written: it leads through a symbolic link to {}, outside the profile's folder {}",
                real.shown(),
                real_folder.shown()
            ),
        ));
    }
    let now = match crate::input::read_bytes(file, what, crate::input::YAML_LIMIT) {
        Ok(bytes) => Some(bytes),
        Err(_)
            if std::fs::metadata(file).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
        {
            None
        }
        Err(e) => return Err(e),
    };
    if now.as_deref() == Some(contents.as_bytes()) {
        return Ok(());
    }
    if now.as_deref().map(crate::digest::sha256_hex).as_deref() != before {
        return Err(Error::in_file(
            file,
            format!(
                "not written: the {what} file changed since this bless read it (another bless, or an edit, wrote it meanwhile); that change is kept. Run bless again: its diff is then against the file as it is now"
            ),
        ));
    }
    refuse_if_ci(var)?;
    // The lock is released when `lock` is dropped, once the file is in place.
    write_atomic(file, contents).map_err(|e| Error::io(file, &format!("write {what}"), e))
}

/// Refuses under CI: baselines change only in a reviewed commit made by a person.
pub fn refuse_under_ci() -> Result<()> {
    refuse_if_ci(|name| std::env::var(name).ok())
}

/// [`refuse_under_ci`] with the environment read through `var` ([`ci_variable`]).
pub fn refuse_if_ci(var: impl Fn(&str) -> Option<String>) -> Result<()> {
    if let Some((name, value)) = ci_variable(var) {
        return Err(Error::msg(format!(
            "{name}={value:?} is set: bless never writes baselines in CI. Run it on your machine and commit the diff for review. \
             (Any of {} set non-empty counts as CI, except CI=false or CI=0.)",
            CI_VARIABLES.join(", ")
        )));
    }
    Ok(())
}
