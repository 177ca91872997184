//! The SASS disassembler: which tool is run (`ACCPROBE_DISASSEMBLER`, else nvdisasm or
//! cuobjdump where CUDA keeps them), how it is run on a CUBIN, and the per-kernel summary of
//! what it prints.

use super::{sass, Sass};
use crate::child::{ended_how, Job, RunError};
use crate::model::variant::Variant;
use crate::text::Shown;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// Environment variable naming the disassembler to run (a path to cuobjdump or nvdisasm),
/// ahead of any other; the compile worker gets its parent's choice through it.
pub use crate::config::DISASSEMBLER_ENV;

/// The disassembler to run: [`DISASSEMBLER_ENV`] when it names a file, else
/// `find_disassembler_preferring`'s search. nvdisasm comes first: without its dataflow
/// pass (`-ndf`, which only adds branch-stack annotations these kernels do not have) it is
/// the faster of the two, and both give the same digests (`sass::recorded` tests).
pub fn find_disassembler() -> Option<PathBuf> {
    find_disassembler_preferring(|| None)
}

/// [`DISASSEMBLER_ENV`] when it names a file, else what `preferred` gives (a caller's own
/// place to look first), else nvdisasm and then cuobjdump on PATH, in `$CUDA_HOME/bin`, in
/// /usr/local/cuda/bin.
pub(crate) fn find_disassembler_preferring(
    preferred: impl FnOnce() -> Option<PathBuf>,
) -> Option<PathBuf> {
    if let Some(p) = crate::config::disassembler().filter(|p| p.is_file()) {
        return Some(p);
    }
    if let Some(p) = preferred() {
        return Some(p);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(h) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(h).join("bin"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    ["nvdisasm", "cuobjdump"]
        .iter()
        .find_map(|tool| dirs.iter().map(|d| d.join(tool)).find(|p| p.is_file()))
}

/// Why SASS will be [`Sass::Unavailable`] on this machine (no disassembler found), or
/// `None` when one is there; known before compiling.
pub fn disassembler_unavailable() -> Option<String> {
    find_disassembler().is_none().then(|| {
        format!("no SASS disassembler: neither cuobjdump nor nvdisasm found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, {DISASSEMBLER_ENV})")
    })
}

/// Disassembles one CUBIN and summarises each of the `variants`' kernels: the text (when
/// it was read) and the summary, or why there is none.
pub fn disassemble(cubin: &[u8], variants: &[Variant]) -> (Option<String>, Sass) {
    let Some(tool) = find_disassembler() else {
        return (
            None,
            Sass::Unavailable(disassembler_unavailable().unwrap_or_default()),
        );
    };
    match disassemble_with(&tool, cubin, time_limit()) {
        Ok(text) => match read_sass(&text, tool.display().to_string(), variants) {
            read @ Sass::Read { .. } => (Some(text), read),
            other => (None, other),
        },
        Err(why) => (None, Sass::Failed(why.to_string())),
    }
}

/// How long the disassembler may run: `ACCPROBE_DISASSEMBLER_TIMEOUT` (which the front
/// ends check first), else its default.
pub(super) fn time_limit() -> Duration {
    crate::config::disassembler_timeout().unwrap_or(Duration::from_secs(
        crate::config::DEFAULT_DISASSEMBLER_TIMEOUT_S,
    ))
}

/// The most of a listing read: more than ten times what the largest matrix gives
/// (cuobjdump's 5 MB for the H200 profile's, `tests/data/h200/sass.txt`).
const LISTING_LIMIT: usize = 64 << 20;

/// The disassembly of `cubin` by `tool`, or why there is none: `tool` is killed, with every
/// process it started, once it has run for `limit`. The CUBIN goes to a file of its own
/// for each call: two devices compile at once in one process (the cache off, or two
/// architectures), and with a name both could make (the process id and the CUBIN's
/// length, say) one device's write or removal would reach the file the other's
/// disassembler is reading.
fn disassemble_with(
    tool: &Path,
    cubin: &[u8],
    limit: Duration,
) -> std::result::Result<String, DisassembleError> {
    let tool_path = || tool.to_path_buf();
    let file = tempfile::Builder::new()
        .prefix("accprobe-")
        .suffix(".cubin")
        .tempfile()
        .map_err(|source| DisassembleError::TempFile {
            dir: std::env::temp_dir(),
            source: Arc::new(source),
        })?;
    std::fs::write(file.path(), cubin).map_err(|source| DisassembleError::Write {
        file: file.path().to_path_buf(),
        source: Arc::new(source),
    })?;
    let ran = Job::new(tool, limit)
        .args(disassembler_flag(tool))
        .arg(file.path())
        .stdout_limit(LISTING_LIMIT)
        .run();
    drop(file);
    let ran = ran.map_err(|source| DisassembleError::Run {
        tool: tool_path(),
        source: Arc::new(source),
    })?;
    match ran.status {
        None => Err(DisassembleError::TimedOut {
            tool: tool_path(),
            limit,
        }),
        Some(status) if !status.success() => Err(DisassembleError::Failed {
            tool: tool_path(),
            status,
            stderr: String::from_utf8_lossy(&ran.stderr.bytes)
                .trim_end()
                .to_string(),
        }),
        Some(_) if ran.stdout.cut => Err(DisassembleError::TooLong {
            tool: tool_path(),
            limit: LISTING_LIMIT,
        }),
        Some(_) => Ok(String::from_utf8_lossy(&ran.stdout.bytes).into_owned()),
    }
}

/// Why a disassembler gave no listing of a CUBIN; [`Sass::Failed`] says it.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum DisassembleError {
    #[error("cannot create a file for the CUBIN in {}: {source}", .dir.shown())]
    TempFile {
        dir: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("cannot write {}: {source}", .file.shown())]
    Write {
        file: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// It could not be started or supervised.
    #[error("the disassembler {} {source}", .tool.shown())]
    Run {
        tool: PathBuf,
        #[source]
        source: Arc<RunError>,
    },
    #[error(
        "the disassembler {} did not finish within {} s and was killed, with every process it started \
         ({} sets the limit)",
        .tool.shown(),
        .limit.as_secs_f64(),
        crate::config::DISASSEMBLER_TIMEOUT_ENV
    )]
    TimedOut { tool: PathBuf, limit: Duration },
    /// It ended unsuccessfully (`stderr`, what it wrote there).
    #[error("the disassembler {} failed ({}): {stderr}", .tool.shown(), ended_how(*.status))]
    Failed {
        tool: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    /// It printed more than `limit` bytes.
    #[error("the disassembler {} printed more than {} MiB: no listing of one CUBIN is that long", .tool.shown(), .limit >> 20)]
    TooLong { tool: PathBuf, limit: usize },
}

/// How `tool` is asked for the SASS: `-ndf -hex` when its name says nvdisasm (`-hex` prints
/// the encoding words the control fields are read from), else `-sass` (cuobjdump, which
/// prints them anyway). Part of the cache key (`cache::key`).
pub(super) fn disassembler_flag(tool: &Path) -> &'static [&'static str] {
    let is_nvdisasm = tool
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("nvdisasm"));
    if is_nvdisasm {
        &["-ndf", "-hex"]
    } else {
        &["-sass"]
    }
}

/// Summarises disassembly text for each variant's kernel.
pub fn read_sass(text: &str, tool: String, variants: &[Variant]) -> Sass {
    let functions = match sass::parse(text) {
        Ok(f) => f,
        Err(e) => return Sass::Failed(format!("{tool}: {e}")),
    };
    let arch = sass::architecture(text);
    let mut kernels = BTreeMap::new();
    for v in variants {
        let Some(f) = functions.get(&v.name()) else {
            return Sass::Failed(format!("{tool}: no SASS for {v}"));
        };
        match sass::summarise_on(f, arch.as_deref()) {
            Ok(s) => {
                kernels.insert(v.name(), s);
            }
            Err(e) => return Sass::Failed(format!("{tool}: {v}: {e}")),
        }
    }
    Sass::Read { tool, kernels }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit no disassembler of these tests comes near (a limit, not a timing).
    const LIMIT: Duration = Duration::from_secs(60);

    /// An executable shell script `name` in `dir` that runs `script`: a disassembler to test
    /// with.
    fn fake_tool(dir: &Path, name: &str, script: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let tool = dir.join(name);
        std::fs::write(&tool, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        tool
    }

    #[test]
    fn a_preferred_disassembler_comes_before_the_search_path() {
        // Unless the variable names one (this process never sets it).
        if crate::config::disassembler().is_some() {
            return eprintln!("{DISASSEMBLER_ENV} is set: skipped");
        }
        let dir = tempfile::tempdir().unwrap();
        let mine = fake_tool(dir.path(), "nvdisasm", "true");
        assert_eq!(
            find_disassembler_preferring(|| Some(mine.clone())),
            Some(mine)
        );
    }

    #[cfg(unix)]
    #[test]
    fn two_disassemblies_at_once_each_read_their_own_cubin() {
        // A disassembler that takes its time and prints the file it was given: two devices
        // of one architecture with the cache off disassemble CUBINs of one length at once.
        let dir = tempfile::tempdir().unwrap();
        let tool = fake_tool(dir.path(), "cuobjdump", "sleep 0.5\nexec cat \"$2\"");
        let cubins = ["the CUBIN of device 0\n", "the CUBIN of device 1\n"];
        assert_eq!(cubins[0].len(), cubins[1].len());
        let read: Vec<std::result::Result<String, DisassembleError>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = cubins
                    .iter()
                    .map(|c| scope.spawn(|| disassemble_with(&tool, c.as_bytes(), LIMIT)))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
        for (c, text) in cubins.iter().zip(read) {
            assert_eq!(text.unwrap(), *c);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_disassembler_starts_with_sigint_and_sigterm_unblocked() {
        // The suite blocks both signals in every thread (crate::interrupt); a child inherits
        // the mask of the thread that starts it, std's Command does not reset it, and a
        // disassembler that hangs would then ignore a CI's SIGTERM.
        let dir = tempfile::tempdir().unwrap();
        let tool = fake_tool(dir.path(), "nvdisasm", "exec grep SigBlk /proc/self/status");
        let text = std::thread::spawn(move || {
            assert_eq!(crate::interrupt::block_in_this_thread(), 0);
            disassemble_with(&tool, b"cubin", LIMIT)
        })
        .join()
        .unwrap()
        .unwrap();
        let mask = u64::from_str_radix(text.trim().trim_start_matches("SigBlk:").trim(), 16)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let ours = (1 << (libc::SIGINT - 1)) | (1 << (libc::SIGTERM - 1));
        assert_eq!(mask & ours, 0, "blocked in the disassembler: {text}");
    }

    #[test]
    fn a_hung_disassembler_is_killed_at_its_limit_with_what_it_started_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let tool = fake_tool(
            dir.path(),
            "nvdisasm",
            &format!("sleep 300 & echo $! > {d}/started\necho $$ > {d}/tool\nwait"),
        );
        let limit = Duration::from_secs(1);
        let e = disassemble_with(&tool, b"cubin", limit).unwrap_err();
        assert!(
            matches!(&e, DisassembleError::TimedOut { tool: t, limit: l } if *t == tool && *l == limit),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "the disassembler {} did not finish within 1 s and was killed, with every process \
                 it started (ACCPROBE_DISASSEMBLER_TIMEOUT sets the limit)",
                tool.display()
            )
        );
        for who in ["tool", "started"] {
            let pid = std::fs::read_to_string(dir.path().join(who)).unwrap();
            let still = crate::child::tests::running(&pid);
            assert!(!still, "the {who} process {pid} still runs");
        }
    }

    #[test]
    fn a_failing_disassembler_is_named_with_its_end_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let tool = fake_tool(dir.path(), "cuobjdump", "echo 'not a CUBIN' >&2; exit 3");
        let e = disassemble_with(&tool, b"cubin", LIMIT).unwrap_err();
        let want = format!(
            "the disassembler {} failed (exited with status 3): not a CUBIN",
            tool.display()
        );
        assert_eq!(e.to_string(), want);
        assert!(
            matches!(&e, DisassembleError::Failed { status, stderr, .. } if status.code() == Some(3) && stderr == "not a CUBIN"),
            "{e:?}"
        );
    }

    /// Set for [`disassembles_as_the_environment_says`]: where it writes what it got.
    const CHILD_OUT: &str = "ACCPROBE_TEST_DISASSEMBLY_OUT";

    /// The child of [`the_environment_names_the_disassembler_and_its_limit`]: the stage's
    /// entry point, with the disassembler and its limit from the environment.
    #[test]
    #[ignore = "entry point of a child process"]
    fn disassembles_as_the_environment_says() {
        let Some(out) = std::env::var_os(CHILD_OUT) else {
            return;
        };
        let said = match disassemble(b"cubin", &[]) {
            (_, Sass::Failed(why)) => why,
            (_, other) => format!("not a failure: {other:?}"),
        };
        std::fs::write(out, said).unwrap();
    }

    #[test]
    fn the_environment_names_the_disassembler_and_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let tool = fake_tool(dir.path(), "nvdisasm", "exec sleep 300");
        let out = dir.path().join("said");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "compile::disassemble::tests::disassembles_as_the_environment_says",
            ])
            .args(["--ignored", "--test-threads", "1"])
            .env(CHILD_OUT, &out)
            .env(DISASSEMBLER_ENV, &tool)
            .env(crate::config::DISASSEMBLER_TIMEOUT_ENV, "0.5")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let said = std::fs::read_to_string(&out).unwrap();
        let want = format!(
            "the disassembler {} did not finish within 0.5 s",
            tool.display()
        );
        assert!(said.starts_with(&want), "{said}");
    }
}
