//! Finding programs: an agent's on the `PATH` it is given, and the server's own (tmux, sh, nice,
//! bwrap) on its own `PATH`, once. At the bottom: anything may use it, it uses nothing of ours.

use std::path::{Path, PathBuf};

/// Where the program of an argv is: a path (with a `/`, relative to `cwd`) that is an executable
/// file, or the first executable of that name in `path` (a `PATH` value). `None`: the pane would
/// only say "command not found" and close, and the agent would look merely gone.
pub fn find_program(program: &str, path: &str, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let candidate = cwd.join(program);
        return executable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path).map(|dir| dir.join(program)).find(|p| executable(p))
}

/// Where `program` is on Switchyard's own `PATH` (its name alone when it is not there, so that
/// running it fails as it would have), looked up once per program. A command that sets its
/// child's environment (a clean one for tmux and gates) and names its program without a path is
/// started by `fork`, which copies the server's page tables; named by its path, it is started by
/// `posix_spawn`. With a few hundred agents at work that fork was most of the server's CPU.
pub fn on_own_path(program: &'static str) -> &'static Path {
    // A handful of programs (tmux, sh, nice), each found once and kept for the process's life.
    static FOUND: std::sync::Mutex<Vec<(&str, &Path)>> = std::sync::Mutex::new(Vec::new());
    let mut found = FOUND.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = found.iter().find(|(name, _)| *name == program) {
        return path;
    }
    let search = std::env::var("PATH").unwrap_or_default();
    let path = find_program(program, &search, Path::new("/")).unwrap_or_else(|| PathBuf::from(program));
    let path: &'static Path = Box::leak(path.into_boxed_path());
    found.push((program, path));
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_on_the_path_or_by_its_own_path_and_only_if_it_can_run() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.path().join("notes"), "text").expect("write");
        let path = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(find_program("tool", &path, Path::new("/")), Some(tool.clone()));
        assert_eq!(find_program("claude-not-installed", &path, Path::new("/")), None);
        assert_eq!(find_program("notes", &path, Path::new("/")), None, "not executable");
        assert_eq!(find_program("./tool", "", dir.path()), Some(dir.path().join("./tool")));
        assert_eq!(find_program(&tool.to_string_lossy(), "", Path::new("/")), Some(tool));
    }
}
