//! What every git the server runs is told, so that nothing a repository's own configuration says
//! runs a program: an agent writes its clone's `.git/config` (and a gate the scratch clone's), and
//! git obeys it — `core.fsmonitor` and hooks on `git status`, `remote.*.uploadpack` on a fetch,
//! filter, diff and merge drivers wherever a file is read, written, compared or merged.
//!
//! Settings given on git's command line win over the repository's, so [`ALWAYS`] overrides the
//! programs git would find under fixed names, and [`overrides`] those under names the repository
//! chooses (`filter.<driver>.clean`, …): their names are read first from the repository itself,
//! with `git config --name-only --get-regexp`, which runs nothing and follows its includes. They
//! go to git as `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`, not as `-c name=value`, because a
//! driver's name may hold a `=` (which `-c` would split at).
//!
//! What cannot be overridden is refused: `url.<base>.insteadOf` takes many values and a later one
//! cannot remove an earlier one, so a repository that rewrites URLs gets no transport at all. Only
//! local repositories and bundles are fetched from (a project's repository is a path, or the
//! node's mirror of its remote; a bundle is a `file`), so every other protocol (`ssh`, `http`,
//! `ext::`) is off whatever the repository says, and with them credential helpers,
//! `core.sshCommand` and askpass programs — except for git speaking to a project's remote from a
//! repository only the server writes ([`super::remote`]), where the node's own ones apply.
//!
//! The local configuration is read when the command is built and again when it runs; an agent
//! that changed it in between could slip a driver by. The server runs git in an agent's clone
//! when the agent is not live (the check before removing it, unless forced), and in the scratch
//! clone after the gate ended (whose `.git` a confined gate cannot write at all).

use std::path::Path;

/// Settings that replace the repository's whatever it says. An empty program means none; a
/// driver set to `false` fails (a merge driver then reports a conflict, never a silent "ours").
const ALWAYS: [(&str, &str); 20] = [
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "false"),
    ("core.askPass", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    // An empty external diff is no program: a patch that would need one fails (ours pass
    // `--no-ext-diff`).
    ("diff.external", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    // A submodule is a repository of its own, with a configuration these names were not read
    // from: git never goes into one.
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("protocol.allow", "never"),
    ("protocol.file.allow", "always"),
];

/// The configuration names, as a regular expression, whose subsection the repository chooses.
const CHOSEN_NAMES: &str = r"^(filter|diff|merge|remote|credential|url)\.";

/// What replaces the repository's setting `name` (as `git config --name-only` prints it: section
/// and variable in lower case), when it names a program git would run; `None` keeps it.
fn replacement(name: &str) -> Option<&'static str> {
    let (section, rest) = name.split_once('.')?;
    let (_, variable) = rest.rsplit_once('.')?;
    Some(match (section, variable) {
        ("filter", "clean" | "smudge" | "process") => "",
        ("filter", "required") => "false",
        ("diff", "command") => "",
        // `cat` shows the file as it is, as if there were no conversion.
        ("diff", "textconv") => "cat",
        ("merge", "driver") => "false",
        ("remote", "uploadpack") => "git-upload-pack",
        ("remote", "receivepack") => "git-receive-pack",
        ("remote", "vcs") => "",
        ("credential", "helper") => "",
        _ => return None,
    })
}

/// What git speaking to a project's remote keeps of the node's own configuration: how it
/// authenticates (credential helpers, `ssh`, askpass).
const NODE_CREDENTIALS: [&str; 3] = ["core.sshCommand", "core.askPass", "credential.helper"];

/// The transports a project's `repo_url` may use, on for git speaking to it.
const REMOTE_TRANSPORTS: [(&str, &str); 3] =
    [("protocol.git.allow", "always"), ("protocol.ssh.allow", "always"), ("protocol.https.allow", "always")];

/// Every setting git in `dir` is given over the repository's own: [`ALWAYS`], then one per
/// program the repository names under a name of its choosing. `to_remote`: git speaks to a
/// project's remote, with the node's credentials and the network transports.
pub(super) async fn overrides(dir: &Path, to_remote: bool) -> Vec<(String, String)> {
    let chosen = chosen_names(dir).await;
    let always = ALWAYS.iter().filter(|(k, _)| !to_remote || !NODE_CREDENTIALS.contains(k));
    let mut settings: Vec<(String, String)> = always.map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if to_remote {
        settings.extend(REMOTE_TRANSPORTS.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    }
    for name in &chosen {
        if let Some(value) = replacement(name) {
            settings.push((name.clone(), value.to_owned()));
        }
    }
    // Rewritten URLs cannot be put back: no transport at all then.
    if chosen.iter().any(|name| name.starts_with("url.")) {
        settings.push(("protocol.file.allow".to_owned(), "never".to_owned()));
    }
    settings
}

/// The names of the settings under [`CHOSEN_NAMES`] that git in `dir` would read (none when it is
/// not a repository). `git config` reads them and runs nothing; it is one more process per git
/// command (about 1.2 ms here), awaited rather than blocking the runtime's thread.
async fn chosen_names(dir: &Path) -> Vec<String> {
    let output = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["config", "--name-only", "--get-regexp", CHOSEN_NAMES])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG_COUNT")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    match output {
        Ok(output) => String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect(),
        Err(_) => Vec::new(),
    }
}

/// Where a fixed upload-pack or receive-pack goes in `args`: right after the subcommand that
/// takes it (`fetch`, `clone`, …), whatever the remote's configuration names.
pub(super) fn fixed_transport(args: &[&str]) -> Option<(usize, &'static str)> {
    let mut i = 0;
    while i < args.len() {
        match args[i] {
            "-c" | "-C" => i += 2,
            option if option.starts_with('-') => i += 1,
            subcommand => {
                let fixed = match subcommand {
                    "fetch" | "pull" | "clone" | "ls-remote" => "--upload-pack=git-upload-pack",
                    "push" => "--receive-pack=git-receive-pack",
                    _ => return None,
                };
                return Some((i + 1, fixed));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_under_chosen_names_are_replaced_and_the_rest_kept() {
        assert_eq!(replacement("filter.evil.clean"), Some(""));
        assert_eq!(replacement("filter.a=b.smudge"), Some(""));
        assert_eq!(replacement("filter.x.required"), Some("false"));
        assert_eq!(replacement("diff.x.textconv"), Some("cat"));
        assert_eq!(replacement("merge.x.driver"), Some("false"));
        assert_eq!(replacement("remote.origin.uploadpack"), Some("git-upload-pack"));
        assert_eq!(replacement("remote.origin.url"), None);
        assert_eq!(replacement("merge.conflictstyle"), None);
    }

    #[test]
    fn a_fixed_pack_program_follows_the_subcommand_that_takes_it() {
        assert_eq!(fixed_transport(&["fetch", "origin"]), Some((1, "--upload-pack=git-upload-pack")));
        assert_eq!(
            fixed_transport(&["-c", "a=b", "--no-pager", "push", "x"]),
            Some((4, "--receive-pack=git-receive-pack"))
        );
        assert_eq!(fixed_transport(&["-c", "fetch=1", "status"]), None);
        assert_eq!(fixed_transport(&["status"]), None);
    }
}

#[cfg(test)]
mod attacks {
    use std::path::{Path, PathBuf};

    use super::super::clones::tests::{commit, project_repo};
    use super::super::clones::{make, unmerged_work};
    use super::super::run as git;

    /// An executable at `dir/name` that leaves `markers/name` behind and passes its input on.
    fn evil(dir: &Path, markers: &Path, name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\ntouch '{}/{name}'\ncat\n", markers.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// What the programs of the hostile configuration left.
    fn left(markers: &Path) -> Vec<String> {
        let names = std::fs::read_dir(markers).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
        let mut names: Vec<String> = names.collect();
        names.sort();
        names
    }

    /// Writes in `clone`'s configuration every program an agent could have git run.
    async fn configure_hostile(clone: &Path, repo: &Path, outside: &Path) -> PathBuf {
        let markers = outside.join("markers");
        let tools = outside.join("tools");
        let hooks = outside.join("hooks");
        for dir in [&markers, &tools, &hooks] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for hook in ["post-index-change", "post-checkout", "pre-commit", "post-merge", "reference-transaction"] {
            evil(&hooks, &markers, hook);
        }
        let tool = |name: &str| evil(&tools, &markers, name).to_string_lossy().into_owned();
        let included = outside.join("included.config");
        std::fs::write(
            &included,
            format!("[filter \"inc\"]\n\tclean = {}\n\tsmudge = {}\n", tool("inc-clean"), tool("inc-smudge")),
        )
        .unwrap();
        let repo_remote = format!("remote.{}.uploadpack", repo.display());
        let settings = [
            ("core.fsmonitor", tool("fsmonitor")),
            ("core.hooksPath", hooks.to_string_lossy().into_owned()),
            ("remote.origin.uploadpack", tool("uploadpack")),
            (repo_remote.as_str(), tool("uploadpack-by-path")),
            ("core.alternateRefsCommand", tool("alternate-refs")),
            ("core.pager", tool("pager")),
            ("core.editor", tool("editor")),
            ("filter.evil.clean", tool("clean")),
            ("filter.evil.smudge", tool("smudge")),
            ("filter.evil.process", tool("process")),
            ("filter.evil.required", "true".into()),
            ("diff.evil.textconv", tool("textconv")),
            ("diff.evil.command", tool("diff-command")),
            ("diff.external", tool("external-diff")),
            ("merge.evil.driver", tool("merge-driver")),
            ("commit.gpgSign", "true".into()),
            ("gpg.program", tool("gpg")),
            ("include.path", included.to_string_lossy().into_owned()),
        ];
        for (key, value) in &settings {
            std::process::Command::new("git").arg("-C").arg(clone).args(["config", key, value]).status().unwrap();
        }
        markers
    }

    #[tokio::test]
    async fn git_in_a_clone_runs_nothing_its_configuration_names_and_still_answers() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        std::fs::write(repo.join(".gitattributes"), "*.txt filter=evil diff=evil merge=evil\n*.md filter=inc\n")
            .unwrap();
        std::fs::write(repo.join("a.txt"), "one\n").unwrap();
        commit(&repo, "attributes").await;
        let clone = dir.path().join("clone");
        make(&repo, &clone, "switchyard/fox", "main").await.unwrap();
        let markers = configure_hostile(&clone, &repo, dir.path()).await;

        // The agent's work: a commit and a changed file, as the check before removal sees them.
        std::fs::write(clone.join("a.txt"), "two\n").unwrap();
        git(&clone, &["add", "-A"]).await.unwrap();
        git(&clone, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "work"]).await.unwrap();
        std::fs::write(clone.join("README.md"), "changed\n").unwrap();
        let work = unmerged_work(&clone, &repo, "main").await.unwrap().expect("unmerged work");
        assert_eq!((work.commits_ahead, work.unpushed, work.dirty_files.clone()), (1, 1, vec!["README.md".to_owned()]));

        // Whatever else the server might run there: diffs, logs, checkouts, a merge, a push.
        git(&clone, &["diff", "HEAD~1", "--stat"]).await.unwrap();
        git(&clone, &["log", "-p", "-2"]).await.unwrap();
        git(&clone, &["checkout", "--quiet", "-b", "other", "HEAD~1"]).await.unwrap();
        std::fs::write(clone.join("a.txt"), "three\n").unwrap();
        git(&clone, &["add", "a.txt"]).await.unwrap();
        git(&clone, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "other"]).await.unwrap();
        let merge = ["-c", "user.name=t", "-c", "user.email=t@t", "merge", "--quiet", "--no-edit", "switchyard/fox"];
        git(&clone, &merge).await.expect_err("a merge driver set to `false` is a conflict, never a silent merge");
        git(&clone, &["merge", "--abort"]).await.unwrap();
        git(&clone, &["push", "--quiet", "origin", "other"]).await.unwrap();
        assert_eq!(left(&markers), Vec::<String>::new(), "nothing the clone's configuration names ran");
        // The same clone's configuration, obeyed by a git the server does not harden.
        std::process::Command::new("git").arg("-C").arg(&clone).args(["status", "--porcelain"]).output().unwrap();
        assert!(left(&markers).contains(&"fsmonitor".to_owned()), "{:?}", left(&markers));
    }

    #[tokio::test]
    async fn a_bundle_is_fetched_and_a_repository_that_rewrites_urls_fetches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let bundle = dir.path().join("work.bundle");
        git(&repo, &["bundle", "create", "--quiet", &bundle.to_string_lossy(), "main"]).await.unwrap();
        let clone = dir.path().join("clone");
        make(&repo, &clone, "switchyard/fox", "main").await.unwrap();
        git(&clone, &["fetch", "--quiet", &bundle.to_string_lossy(), "main:refs/bundled/main"]).await.unwrap();
        assert!(git(&clone, &["rev-parse", "refs/bundled/main"]).await.is_ok());

        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        git(&elsewhere, &["init", "--quiet"]).await.unwrap();
        let rewrite = format!("url.{}.insteadOf", elsewhere.display());
        git(&clone, &["config", &rewrite, &repo.to_string_lossy()]).await.unwrap();
        let refused = unmerged_work(&clone, &repo, "main").await.expect_err("no transport when URLs are rewritten");
        assert!(refused.to_string().contains("not allowed"), "{refused}");
    }
}
