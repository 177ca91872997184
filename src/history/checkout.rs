//! The commit of the git checkout a run is made in, read from its files (no `git`
//! process): `.git` found from the working directory up (a folder, or a worktree's file
//! naming its folder), `HEAD` (a commit, or a branch resolved through the loose refs and
//! `packed-refs` of the repository the worktree shares). Every file is read with a bound;
//! anything unexpected is no commit, never an error: the history records what it knows.

use std::path::{Path, PathBuf};

const LIMIT: u64 = 1 << 20;

/// The commit `HEAD` names in the checkout holding `dir`, 40 (or 64) hex digits.
pub(crate) fn commit(dir: &Path) -> Option<String> {
    let git = git_dir(dir)?;
    let common = read(&git.join("commondir"))
        .map(|c| git.join(c.trim()))
        .unwrap_or_else(|| git.clone());
    let head = read(&git.join("HEAD"))?;
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref: ") else {
        return hex(head);
    };
    for base in [&git, &common] {
        if let Some(c) = read(&base.join(reference)).and_then(|c| hex(c.trim())) {
            return Some(c);
        }
    }
    read(&common.join("packed-refs"))?.lines().find_map(|l| {
        let (commit, name) = l.split_once(' ')?;
        (name.trim() == reference).then(|| hex(commit)).flatten()
    })
}

/// The git folder of the checkout holding `dir`.
fn git_dir(dir: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(dir).ok()?;
    for d in start.ancestors() {
        let dot = d.join(".git");
        if dot.is_dir() {
            return Some(dot);
        }
        if dot.is_file() {
            let text = read(&dot)?;
            let to = text.trim().strip_prefix("gitdir: ")?;
            return Some(d.join(to));
        }
    }
    None
}

fn read(file: &Path) -> Option<String> {
    crate::input::read_text(file, "a git file", LIMIT).ok()
}

fn hex(s: &str) -> Option<String> {
    (matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_branch_a_detached_head_a_packed_ref_and_a_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let git = repo.join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{A}\n")).unwrap();
        assert_eq!(commit(&repo.join("src/deep")).as_deref(), Some(A));
        std::fs::remove_file(git.join("refs/heads/main")).unwrap();
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs\n{B} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(commit(&repo).as_deref(), Some(B));
        // A worktree: `.git` is a file naming its folder, which shares the main one's refs.
        let wt_git = git.join("worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        assert_eq!(commit(&wt).as_deref(), Some(B));
        std::fs::write(git.join("HEAD"), format!("{A}\n")).unwrap();
        assert_eq!(commit(&repo).as_deref(), Some(A), "detached");
        std::fs::write(git.join("HEAD"), "garbage\n").unwrap();
        assert_eq!(commit(&repo), None);
    }
}
