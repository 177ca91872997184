//! Installed toolchains, each compiled in a worker of its own: not an NVRTC refused, a
//! worker folder never one that was there, a folder with spaces named whole, and no
//! worker outliving its parent.

use crate::*;
use accprobe::compile;
use libtest_mimic::{Completion, Failed};

/// A folder holding a file named like libnvrtc that is no library: the worker says so.
pub(crate) fn not_an_nvrtc_is_refused_by_the_worker() -> Result<Completion, Failed> {
    use accprobe::compile::toolchain::resolve;
    use accprobe::compile::worker::{spawn_worker, LoadError};
    let dir = std::env::temp_dir().join(format!("accprobe-fake-nvrtc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("libnvrtc.so.12"), "not a library").map_err(|e| e.to_string())?;
    let t = resolve(dir.to_str().unwrap(), &dir).map_err(|e| e.to_string())?;
    let report = spawn_worker(
        &t,
        &["sm_90".into()],
        &documented_variants()[..1],
        None,
        None,
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    match report.toolchain {
        Err(e @ LoadError::NotLoadable { .. })
            if e.to_string().contains("is not an NVRTC: it does not load") =>
        {
            Ok(Completion::Completed)
        }
        other => Err(format!("expected a refusal, got {other:?}").into()),
    }
}

/// The folder a worker's request and report go through is the worker's own: a folder or a
/// link already at a name the parent could predict (its process id and the toolchain's
/// folder) is neither written into nor read from.
pub(crate) fn a_worker_folder_is_never_one_that_was_there() -> Result<Completion, Failed> {
    use accprobe::compile::{toolchain::resolve, worker::spawn_worker};
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path().join("fake nvrtc");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("libnvrtc.so.12"), "not a library").map_err(|e| e.to_string())?;
    let t = resolve(dir.to_str().unwrap(), &dir).map_err(|e| e.to_string())?;
    let elsewhere = tmp.path().join("somebody else's");
    std::fs::create_dir_all(&elsewhere).map_err(|e| e.to_string())?;
    let predicted = std::env::temp_dir().join(format!(
        "accprobe-worker-{}-{}",
        std::process::id(),
        &compile::sha256_hex_of(t.lib_dir.to_string_lossy().as_bytes())[..12]
    ));
    let _ = std::fs::remove_file(&predicted);
    std::os::unix::fs::symlink(&elsewhere, &predicted).map_err(|e| e.to_string())?;
    let report = spawn_worker(
        &t,
        &["sm_90".into()],
        &documented_variants()[..1],
        None,
        None,
    );
    let _ = std::fs::remove_file(&predicted);
    let written: Vec<String> = std::fs::read_dir(&elsewhere)
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if !written.is_empty() {
        return Err(format!("the worker wrote {written:?} through a link it found").into());
    }
    match report {
        Ok(r) if r.toolchain.is_err() => Ok(Completion::Completed),
        other => Err(format!("expected the worker's refusal, got {other:?}").into()),
    }
}

/// Every toolchain installed by ci/toolchains.sh, each in its own worker process: sm_90
/// compiles with that NVRTC's own library, an architecture beyond it is unsupported, one
/// within its range that does not exist is refused.
pub(crate) fn installed_toolchains_compile_in_their_own_workers() -> Result<Completion, Failed> {
    use accprobe::compile::toolchain::{default_root, installed, resolve};
    use accprobe::compile::worker::spawn_worker;
    use accprobe::model::compiled::ArchOutcome;
    let root = default_root();
    let all = installed(&root);
    if all.is_empty() {
        return Ok(Completion::ignored_with(format!(
            "no toolchain installed in {} (ci/toolchains.sh installs them)",
            root.display()
        )));
    }
    let variants = &documented_variants()[..2];
    let archs: Vec<String> = ["sm_90", "sm_81", "sm_990"].map(String::from).to_vec();
    for (version, _) in &all {
        let t = resolve(version, &root).map_err(|e| e.to_string())?;
        let r = spawn_worker(&t, &archs, variants, None, None)?;
        let id = r.toolchain.map_err(|e| format!("{version}: {e}"))?;
        if !version.starts_with(&format!("{}.", id.nvrtc_version)) {
            return Err(format!("{version}: the worker loaded NVRTC {}", id.nvrtc_version).into());
        }
        if !id.library.contains(&format!("nvrtc-{version}")) {
            return Err(format!("{version}: the worker loaded {}", id.library).into());
        }
        match &r.architectures[..] {
            [(_, ArchOutcome::Compiled(m)), (_, ArchOutcome::Failed(unknown)), (_, ArchOutcome::Unsupported(newer))] => {
                if m.variants.len() != 2
                    || !unknown.contains("does not know architecture sm_81")
                    || !newer.contains("newest architecture")
                {
                    return Err(format!("{version}: {m:?} / {unknown} / {newer}").into());
                }
            }
            other => return Err(format!("{version}: {other:?}").into()),
        }
    }
    Ok(Completion::Completed)
}

/// The 13.0 toolchain installed, copied into two folders whose paths hold spaces: each
/// copy is a toolchain of its own for the cache (the key names the library by its whole
/// path), and the worker names the library it loaded. `/proc/self/maps` pads its fields
/// with spaces; a path read as its first word named no library, and both copies shared
/// the entries of a key that said only NVRTC 13.0.
pub(crate) fn a_toolchain_in_a_folder_with_spaces_is_named_whole() -> Result<Completion, Failed> {
    use accprobe::compile::toolchain::{default_root, installed, resolve};
    use accprobe::compile::worker::spawn_worker;
    use accprobe::model::compiled::ArchOutcome;
    let root = default_root();
    let Some((version, _)) = installed(&root)
        .into_iter()
        .find(|(v, _)| v.starts_with("13.0."))
    else {
        return Ok(Completion::ignored_with(format!(
            "NVRTC 13.0 is not installed in {} (ci/toolchains.sh installs it)",
            root.display()
        )));
    };
    let from = resolve(&version, &root).map_err(|e| e.to_string())?.lib_dir;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let copy = |name: &str| -> Result<std::path::PathBuf, String> {
        let lib = tmp.path().join(name).join("lib");
        std::fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
        for e in std::fs::read_dir(&from).map_err(|e| e.to_string())? {
            let e = e.map_err(|e| e.to_string())?;
            let to = lib.join(e.file_name());
            match std::fs::read_link(e.path()) {
                Ok(target) => std::os::unix::fs::symlink(target, &to),
                Err(_) => std::fs::hard_link(e.path(), &to)
                    .or_else(|_| std::fs::copy(e.path(), &to).map(|_| ())),
            }
            .map_err(|e| e.to_string())?;
        }
        Ok(lib)
    };
    let cache = tmp.path().join("cache");
    let variants = &documented_variants()[..1];
    let mut uses = Vec::new();
    for name in ["nvrtc copy one", "nvrtc copy one", "nvrtc copy two"] {
        let lib = match tmp.path().join(name).join("lib") {
            l if l.is_dir() => l,
            _ => copy(name)?,
        };
        let t = resolve(lib.to_str().unwrap(), &root).map_err(|e| e.to_string())?;
        let r = spawn_worker(&t, &["sm_90".into()], variants, Some(&cache), None)?;
        let id = r.toolchain.map_err(|e| format!("{name}: {e}"))?;
        if !id.library.contains(name) {
            return Err(format!("{name}: the worker names {}", id.library).into());
        }
        match &r.architectures[..] {
            [(_, ArchOutcome::Compiled(m))] => uses.push(m.cache.clone()),
            other => return Err(format!("{name}: {other:?}").into()),
        }
    }
    if uses != ["miss", "hit", "miss"] {
        return Err(format!("cache uses {uses:?}, expected miss, hit, miss").into());
    }
    Ok(Completion::Completed)
}

/// Set in the child process of [`a_worker_does_not_outlive_its_parent`]: it starts a compile
/// worker that never finishes and waits for it.
pub(crate) const PARENT_MODE: &str = "ACCPROBE_TEST_WORKER_PARENT";

/// The processes whose parent is `pid`, from /proc.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.split_whitespace().eq(["PPid:", &pid.to_string()]))
            })
        })
        .collect()
}

/// Whether process `pid` still runs (a zombie has ended).
pub(crate) fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Set with [`PARENT_MODE`]: the file the child's fake disassembler writes its process id
/// to once it disassembles.
pub(crate) const DISASSEMBLER_PID: &str = "ACCPROBE_TEST_DISASSEMBLER_PID";

/// A run that is signalled (a CI cancel, nextest's timeout) while a toolchain compiles and
/// disassembles must not leave its compile worker, nor the worker's disassembler, running
/// on, unwatched.
pub(crate) fn a_worker_does_not_outlive_its_parent() -> Result<Completion, Failed> {
    use accprobe::compile::toolchain::{default_root, installed};
    let root = default_root();
    let Some((version, _)) = installed(&root).into_iter().last() else {
        return Ok(Completion::ignored_with(format!(
            "no toolchain installed in {} (ci/toolchains.sh installs them)",
            root.display()
        )));
    };
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let pid_file = tmp.path().join("disassembler.pid");
    let mut parent = std::process::Command::new(std::env::current_exe().unwrap())
        .env(PARENT_MODE, &version)
        .env(DISASSEMBLER_PID, &pid_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let end = |parent: &mut std::process::Child| {
        let _ = parent.kill();
        let _ = parent.wait();
    };
    // The worker compiles, then disassembles: the fake disassembler says when.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let disassembler = loop {
        let pid = std::fs::read_to_string(&pid_file).ok();
        if let Some(p) = pid.and_then(|t| t.trim().parse::<u32>().ok()) {
            break p;
        }
        if std::time::Instant::now() > deadline || parent.try_wait().ok().flatten().is_some() {
            end(&mut parent);
            return Err("the parent's worker never disassembled".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let worker = children_of(parent.id());
    // SAFETY: signals the child this test started and has not waited for yet.
    unsafe { libc::kill(parent.id() as i32, libc::SIGTERM) };
    let _ = parent.wait();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for pid in worker.into_iter().chain([disassembler]) {
        while running(pid) {
            if std::time::Instant::now() > deadline {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                return Err(format!("process {pid} still runs after its run was signalled").into());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    Ok(Completion::Completed)
}
