//! Projects: a named scope over one git repository — create one, change it (with `If-Match`),
//! delete it while nothing belongs to it. Its repository is either `repo_path`, which must be a
//! git repository when it is set, or `repo_url`, a git remote that must answer and have the
//! target branch (each node then keeps its own mirror of it: [`super::repository`]); the slug
//! never changes.

use std::path::Path;

use secrecy::{ExposeSecret, SecretString};
use sqlx::PgConnection;
use uuid::Uuid;

use super::idempotency::{self, Idempotency};
use super::{Ctx, Error, Fields, IfMatch, Result};
use crate::db::projects::{self, Project, ProjectFields, SecretChange};
use crate::domain::agent_kind::is_valid_branch;
use crate::domain::permissions::Permissions;
use crate::domain::project::{
    is_valid_slug, ConductorConfig, ForkConfig, MergeQueueConfig, PrShepherdConfig, MAX_AGENTS, MAX_ITERATIONS,
};
use crate::git::{self, clones, GitError};
use crate::providers::{Providers, Sandbox};

/// What a new project is made of; what is not given takes its default (`main`, configs off).
#[derive(Debug, Default)]
pub struct NewProject {
    pub slug: String,
    pub name: String,
    /// Absolute path of a git repository on this server (the repository itself, not a folder in
    /// it); empty when the repository is `repo_url`.
    pub repo_path: String,
    /// The repository as a git remote (`file://`, `git://`, `ssh://`, `https://`).
    pub repo_url: Option<String>,
    /// The remote's credential (`user:password`, or a token), when the nodes' git configuration
    /// has none.
    pub repo_secret: Option<SecretString>,
    /// The remote of `repo_path` the merged target is pushed to (empty: none; unset: `origin`
    /// when the repository has it).
    pub push_remote: Option<String>,
    pub target_branch: Option<String>,
    pub github_url: Option<String>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
    pub conductor_config: Option<ConductorConfig>,
}

/// A change to a project: only the fields given change; `github_url: Some(None)` clears it, a
/// config replaces the whole config.
#[derive(Debug, Default)]
pub struct ProjectPatch {
    pub name: Option<String>,
    pub repo_path: Option<String>,
    /// `Some(None)` clears it (then `repo_path` must be given).
    pub repo_url: Option<Option<String>>,
    pub repo_secret: Option<Option<SecretString>>,
    pub push_remote: Option<Option<String>>,
    pub target_branch: Option<String>,
    pub github_url: Option<Option<String>>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
    pub conductor_config: Option<ConductorConfig>,
}

/// The id of the project named by `slug` in `field`; an unknown slug is a bad `field`.
pub async fn id(conn: &mut PgConnection, slug: &str, field: &str) -> Result<Uuid> {
    projects::id_by_slug(conn, slug).await?.ok_or_else(|| Error::invalid(field, format!("no project `{slug}`")))
}

/// The permission policy project `project_id` chose for `provider`'s agents, if it chose one.
pub async fn permissions_for(
    conn: &mut PgConnection,
    project_id: Uuid,
    provider: &str,
) -> Result<Option<crate::domain::permissions::Permissions>> {
    Ok(projects::conductor_config(conn, project_id).await?.permissions.remove(provider))
}

pub fn no_project(slug: &str) -> Error {
    Error::NotFound(format!("no project `{slug}`"))
}

/// Creates a project over an existing git repository.
#[tracing::instrument(skip_all, fields(slug = ?new.slug), err(level = "debug"))]
pub async fn create(ctx: &Ctx, new: NewProject, idem: Option<&Idempotency>) -> Result<CreatedProject> {
    let mut errors = Fields::default();
    errors.check("slug", is_valid_slug(&new.slug), "must match ^[a-z0-9][a-z0-9-]{0,62}$");
    let fields = validate(
        ProjectFields {
            name: new.name,
            repo_path: new.repo_path,
            repo_url: new.repo_url,
            repo_secret: new.repo_secret.map(SecretChange::Set).unwrap_or_default(),
            push_remote: new.push_remote,
            target_branch: new.target_branch.unwrap_or_else(|| "main".to_owned()),
            github_url: new.github_url,
            fork_config: new.fork_config.unwrap_or_default(),
            merge_queue_config: new.merge_queue_config.unwrap_or_default(),
            pr_shepherd_config: new.pr_shepherd_config.unwrap_or_default(),
            conductor_config: new.conductor_config.unwrap_or_default(),
        },
        &ctx.data_dir,
        &ctx.providers.current(),
        &mut errors,
    );
    errors.finish()?;
    check_place(&fields, None, &ctx.data_dir).await?;
    let mut tx = ctx.db.begin().await?;
    let project = projects::create(&mut tx, &new.slug, &fields)
        .await
        .map_err(Error::unique_as("projects_slug_key", format!("a project with slug `{}` exists", new.slug)))?;
    let warnings = match project.repo_url {
        Some(_) => Vec::new(),
        None => target_checked_out(&project.repo_path, &project.target_branch).into_iter().collect(),
    };
    let created = CreatedProject { project, warnings };
    idempotency::record(&mut tx, idem, &created).await?;
    ctx.feed.commit(tx).await?;
    Ok(created)
}

/// A project just created, with what a person should know about it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CreatedProject {
    #[serde(flatten)]
    pub project: Project,
    /// Accepted, but worth a word: the target branch is checked out in a working tree of the
    /// repository (the merge queue advances it with each merge). Empty when nothing is.
    pub warnings: Vec<String>,
}

/// Changes some of a project's fields, if it is still at a version `if_match` names. A patch
/// that changes nothing keeps the version (and records nothing).
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn update(ctx: &Ctx, slug: &str, if_match: &IfMatch, patch: ProjectPatch) -> Result<Project> {
    let mut tx = ctx.db.begin().await?;
    let current = projects::find(&mut tx, slug, true).await?.ok_or_else(|| no_project(slug))?;
    if_match.check(&format!("project `{slug}`"), current.version)?;
    let old = current.fields();
    let mut errors = Fields::default();
    // Moving a project to a remote (or back) names only the new place: the old one goes.
    let (repo_path, repo_url) = match (patch.repo_path, patch.repo_url) {
        (None, Some(url)) => (url.as_ref().map_or_else(|| old.repo_path.clone(), |_| String::new()), url),
        (Some(path), None) => (path, None),
        (path, url) => (path.unwrap_or_else(|| old.repo_path.clone()), url.unwrap_or_else(|| old.repo_url.clone())),
    };
    let new = validate(
        ProjectFields {
            name: patch.name.unwrap_or_else(|| old.name.clone()),
            repo_path,
            repo_url,
            repo_secret: match patch.repo_secret {
                None => SecretChange::Keep,
                Some(Some(secret)) => SecretChange::Set(secret),
                Some(None) => SecretChange::Clear,
            },
            push_remote: patch.push_remote.unwrap_or_else(|| old.push_remote.clone()),
            target_branch: patch.target_branch.unwrap_or_else(|| old.target_branch.clone()),
            github_url: patch.github_url.unwrap_or_else(|| old.github_url.clone()),
            fork_config: patch.fork_config.unwrap_or_else(|| old.fork_config.clone()),
            merge_queue_config: patch.merge_queue_config.unwrap_or_else(|| old.merge_queue_config.clone()),
            pr_shepherd_config: patch.pr_shepherd_config.unwrap_or_else(|| old.pr_shepherd_config.clone()),
            conductor_config: patch.conductor_config.unwrap_or_else(|| old.conductor_config.clone()),
        },
        &ctx.data_dir,
        &ctx.providers.current(),
        &mut errors,
    );
    errors.finish()?;
    let changed = changed_fields(&old, &new);
    if changed.is_empty() {
        return Ok(current);
    }
    // Only a new place is checked: a repository that went missing must not block a rename.
    let moved = new.repo_path != old.repo_path || new.repo_url != old.repo_url;
    let secret = new.repo_secret != SecretChange::Keep;
    if moved || secret || new.target_branch != old.target_branch {
        let kept = match (&new.repo_secret, current.repo_secret_set) {
            (SecretChange::Keep, true) => projects::repository(&mut tx, current.id).await?.repo_secret,
            _ => None,
        };
        check_place(&new, kept, &ctx.data_dir).await?;
    }
    let project = projects::update(&mut tx, &current, &new, &changed).await?;
    ctx.feed.commit(tx).await?;
    if moved {
        remove_unused_mirrors(ctx).await;
    }
    Ok(project)
}

/// Deletes a project and its boards. Refused while tasks, wishes or agents still belong to it.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn delete(ctx: &Ctx, slug: &str) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    // The row lock makes a task or wish created meanwhile wait, then fail its foreign key.
    let project = projects::find(&mut tx, slug, true).await?.ok_or_else(|| no_project(slug))?;
    let dependents = projects::dependents(&mut tx, project.id).await?;
    if dependents.tasks > 0 || dependents.wishes > 0 || dependents.agents > 0 {
        return Err(Error::conflict(
            format!(
                "project `{slug}` still has {}, {} and {}; delete or move them first",
                plural(dependents.tasks, "task"),
                plural(dependents.wishes, "wish"),
                plural(dependents.agents, "agent")
            ),
            None,
        ));
    }
    projects::delete(&mut tx, &project).await?;
    ctx.feed.commit(tx).await?;
    remove_unused_mirrors(ctx).await;
    Ok(())
}

/// This node's mirror of a remote no project uses any more goes at once (other nodes' go on
/// their workers' next sweep). A failure is logged only: the change stands, and the next sweep
/// tries again.
async fn remove_unused_mirrors(ctx: &Ctx) {
    if let Err(e) = super::repository::remove_unused_mirrors(&ctx.db, &ctx.data_dir).await {
        tracing::warn!(error = %e, "removing mirrors no project uses");
    }
}

fn plural(n: i64, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "wish") => format!("{n} wishes"),
        _ => format!("{n} {noun}s"),
    }
}

/// Trims and checks the fields every create and update must satisfy, recording every bad one.
/// Lengths are checked before anything else, so no huge value reaches git or the database.
fn validate(mut f: ProjectFields, data_dir: &Path, providers: &Providers, errors: &mut Fields) -> ProjectFields {
    f.name = f.name.trim().to_owned();
    errors.check("name", !f.name.is_empty() && f.name.chars().count() <= 200, "must be 1 to 200 characters");
    f.target_branch = f.target_branch.trim().to_owned();
    errors.check(
        "target_branch",
        is_valid_branch(&f.target_branch),
        "must be a branch name git accepts (at most 200 characters, not HEAD)",
    );
    f.github_url = f.github_url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty());
    if let Some(url) = &f.github_url {
        errors.check(
            "github_url",
            (url.starts_with("https://") || url.starts_with("http://")) && url.len() <= 500,
            "must be an http(s) URL of at most 500 characters",
        );
    }
    let fork = &f.fork_config;
    errors.max_len_opt("fork_config.upstream_url", fork.upstream_url.as_deref(), MAX_URL);
    errors.max_len_opt("fork_config.upstream_owner", fork.upstream_owner.as_deref(), 100);
    errors.max_len_opt("fork_config.upstream_repo", fork.upstream_repo.as_deref(), 100);
    let conductor = &f.conductor_config;
    errors.check(
        "conductor_config.max_agents",
        (1..=MAX_AGENTS).contains(&conductor.max_agents),
        format!("must be 1 to {MAX_AGENTS}"),
    );
    errors.check(
        "conductor_config.max_iterations",
        (1..=MAX_ITERATIONS).contains(&conductor.max_iterations),
        format!("must be 1 to {MAX_ITERATIONS}"),
    );
    let known = |name: &str| providers.get(name).is_some();
    errors.check(
        "conductor_config.provider",
        known(&conductor.provider),
        format!("unknown provider; known: {}", providers.names().join(", ")),
    );
    errors.check("conductor_config.fallback_providers", conductor.fallback_providers.len() <= 10, "at most 10");
    for (i, name) in conductor.fallback_providers.iter().enumerate() {
        errors.check(format!("conductor_config.fallback_providers[{i}]"), known(name), "unknown provider");
    }
    for (name, policy) in &conductor.permissions {
        let field = format!("conductor_config.permissions.{name}");
        match providers.get(name) {
            None => {
                errors.check(field, false, "unknown provider");
            }
            Some(provider) => {
                let allowed = *policy != Permissions::Auto || provider.sandbox != Sandbox::None;
                errors.check(field, allowed, crate::domain::permissions::AUTO_NEEDS_SANDBOX);
            }
        }
    }
    f.repo_path = f.repo_path.trim().to_owned();
    f.repo_url = f.repo_url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty());
    f.push_remote = f.push_remote.map(|r| r.trim().to_owned());
    match (f.repo_path.is_empty(), &f.repo_url) {
        (false, Some(_)) => {
            errors.check("repo_url", false, "give either repo_path or repo_url, not both");
        }
        (true, None) => {
            errors.check("repo_path", false, "give repo_path (a repository here) or repo_url (a git remote)");
        }
        (false, None) => {
            if let Err(why) = repo_path_rule(&f.repo_path, data_dir) {
                errors.check("repo_path", false, why);
            }
        }
        (true, Some(url)) => {
            if let Err(why) = repo_url_rule(url) {
                errors.check("repo_url", false, why);
            }
            errors.check("push_remote", f.push_remote.is_none(), "a project on a remote pushes there: leave it unset");
        }
    }
    if let SecretChange::Set(secret) = &f.repo_secret {
        let secret = secret.expose_secret();
        errors.check("repo_secret", f.repo_url.is_some(), "only a project with repo_url has a secret");
        let sane = !secret.is_empty() && secret.len() <= 4096 && !secret.chars().any(char::is_control);
        errors.check("repo_secret", sane, "must be 1 to 4096 characters, none of them control characters");
    }
    if let Some(name) = &f.push_remote {
        errors.check(
            "push_remote",
            is_remote_name(name),
            "must be the name of a git remote (letters, digits, `.`, `_`, `-`), or empty for none",
        );
    }
    f
}

/// A git remote's name as `git remote add` takes it, or empty (none).
fn is_remote_name(name: &str) -> bool {
    name.len() <= 200
        && !name.starts_with('-')
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `repo_url` is a `file://`, `git://`, `ssh://` or `https://` URL of a sane length, with no
/// password in it (that is `repo_secret`'s: a URL is shown and logged).
fn repo_url_rule(url: &str) -> std::result::Result<(), String> {
    if url.len() > MAX_URL {
        return Err(format!("must be at most {MAX_URL} bytes"));
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain spaces or control characters".into());
    }
    let Some(scheme) = git::remote::SCHEMES.iter().find(|s| url.starts_with(**s)) else {
        return Err("must be a file://, git://, ssh:// or https:// URL".into());
    };
    let rest = &url[scheme.len()..];
    let authority = rest.split('/').next().unwrap_or("");
    if *scheme == "file://" && !rest.starts_with('/') {
        return Err("a file:// URL names an absolute path: file:///srv/git/project.git".into());
    }
    if *scheme != "file://" && (authority.is_empty() || rest.len() == authority.len()) {
        return Err("must name a host and a repository on it".into());
    }
    if authority.rsplit_once('@').is_some_and(|(user, _)| user.contains(':')) {
        return Err("must not hold a password: give it as repo_secret".into());
    }
    Ok(())
}

/// The longest URL kept.
const MAX_URL: usize = 2048;

/// `repo_path` is an absolute path of a sane length, names the repository rather than its `.git`
/// directory, and lies outside Switchyard's data directory (agents' clones and tokens live there).
fn repo_path_rule(path: &str, data_dir: &Path) -> std::result::Result<(), String> {
    if path.len() > MAX_PATH {
        return Err(format!("must be at most {MAX_PATH} bytes"));
    }
    // Written into files of one path a line (a clone's alternates): a line break would add one.
    if path.chars().any(char::is_control) {
        return Err("must not contain control characters (a line break, a tab, an escape)".into());
    }
    let given = Path::new(path);
    if !given.is_absolute() {
        return Err("must be an absolute path".into());
    }
    if given.components().any(|c| c.as_os_str() == ".git") {
        return Err("must be the repository's folder, not its .git directory".into());
    }
    // Symlinks and `..` resolved where the paths exist, compared as written where they do not.
    let real = std::fs::canonicalize(given).unwrap_or_else(|_| given.to_path_buf());
    let data = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    if real.starts_with(&data) || given.starts_with(data_dir) {
        return Err("must not be inside Switchyard's data directory".into());
    }
    Ok(())
}

/// The longest path accepted (Linux's PATH_MAX).
const MAX_PATH: usize = 4096;

fn changed_fields(old: &ProjectFields, new: &ProjectFields) -> Vec<&'static str> {
    [
        ("name", old.name != new.name),
        ("repo_path", old.repo_path != new.repo_path),
        ("repo_url", old.repo_url != new.repo_url),
        ("repo_secret", new.repo_secret != SecretChange::Keep),
        ("push_remote", old.push_remote != new.push_remote),
        ("target_branch", old.target_branch != new.target_branch),
        ("github_url", old.github_url != new.github_url),
        ("fork_config", old.fork_config != new.fork_config),
        ("merge_queue_config", old.merge_queue_config != new.merge_queue_config),
        ("pr_shepherd_config", old.pr_shepherd_config != new.pr_shepherd_config),
        ("conductor_config", old.conductor_config != new.conductor_config),
    ]
    .into_iter()
    .filter_map(|(name, differs)| differs.then_some(name))
    .collect()
}

/// The project's repository must be there: `repo_path` a repository with the target branch, or
/// `repo_url` a remote that answers and has it.
async fn check_place(f: &ProjectFields, kept: Option<secrecy::SecretString>, data_dir: &Path) -> Result<()> {
    let Some(url) = &f.repo_url else {
        check_repository(&f.repo_path).await?;
        return check_target_branch(f).await;
    };
    let secret = match &f.repo_secret {
        SecretChange::Set(secret) => Some(secret.clone()),
        SecretChange::Keep => kept,
        SecretChange::Clear => None,
    };
    let remote = git::remote::Remote { url: url.clone(), secret };
    match git::remote::has_branch(data_dir, &remote, &f.target_branch).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::invalid("target_branch", format!("no branch `{}` on {url}", f.target_branch))),
        Err(GitError::Failed { stderr, .. }) => {
            let why = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim_start_matches("fatal: ");
            Err(Error::invalid("repo_url", format!("cannot be read ({why})")))
        }
        Err(GitError::Timeout { .. }) => Err(Error::invalid("repo_url", "the remote did not answer in time")),
        Err(io @ GitError::Io(_)) => Err(Error::internal(io)),
    }
}

/// `repo_path` must be a git repository itself ([`git::check_repository`]); what git says is
/// the caller's to fix, so it is a bad `repo_path`, not our failure.
async fn check_repository(path: &str) -> Result<()> {
    git::check_repository(Path::new(path)).await.map_err(|e| match e {
        GitError::Failed { stderr, .. } => Error::invalid("repo_path", format!("is not a git repository ({stderr})")),
        GitError::Timeout { .. } => Error::invalid("repo_path", "git did not answer within 10 seconds"),
        io @ GitError::Io(_) => Error::internal(io),
    })
}

/// The target branch must exist in the repository: agents branch from it and merge into it.
async fn check_target_branch(f: &ProjectFields) -> Result<()> {
    let exists = clones::branch_exists(Path::new(&f.repo_path), &f.target_branch).await.map_err(|e| match e {
        GitError::Failed { stderr, .. } => {
            Error::invalid("target_branch", format!("git could not check it ({stderr})"))
        }
        other => Error::internal(other),
    })?;
    if exists {
        Ok(())
    } else {
        Err(Error::invalid("target_branch", format!("no branch `{}` in {}", f.target_branch, f.repo_path)))
    }
}

/// What a person should know about a project whose target branch is checked out in a working
/// tree of its repository (it is accepted): the merge queue moves that tree along with the
/// branch, or waits while it has changes. `None` when it is not checked out.
pub fn target_checked_out(repo_path: &str, target_branch: &str) -> Option<String> {
    if repo_path.is_empty() {
        return None; // on a remote: each node's mirror is bare
    }
    let trees = crate::git::merge::checked_out(Path::new(repo_path))?;
    let at = trees.get(target_branch)?;
    Some(format!(
        "`{target_branch}` is checked out in {}: the merge queue will advance that working tree with each merge \
         (and wait while it has uncommitted changes). Check out another branch there, or use a bare repository, \
         to keep your files out of its way.",
        at.display()
    ))
}

/// The id of the project a listing's `project` filter names (none: no filter); an unknown slug
/// is a bad `project` field.
pub async fn filter_id(conn: &mut PgConnection, slug: Option<&str>) -> Result<Option<Uuid>> {
    let Some(slug) = slug else { return Ok(None) };
    let id = projects::id_by_slug(conn, slug).await?;
    id.map(Some).ok_or_else(|| Error::invalid("project", format!("no project `{slug}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repo_url_is_a_remote_of_a_known_scheme_without_a_password() {
        for good in [
            "file:///srv/git/shop.git",
            "git://127.0.0.1:9418/shop.git",
            "ssh://git@git.example.com/shop.git",
            "https://git.example.com/acme/shop.git",
            "https://ci@git.example.com/shop.git",
        ] {
            assert_eq!(repo_url_rule(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("http://git.example.com/shop.git", "file://, git://, ssh:// or https://"),
            ("git@git.example.com:shop.git", "file://, git://, ssh:// or https://"),
            ("ext::sh -c touch% /tmp/pwned", "spaces"),
            ("https://me:hunter2@git.example.com/shop.git", "password"),
            ("file://relative/shop.git", "absolute path"),
            ("https://git.example.com", "a host and a repository"),
            ("https:///shop.git", "a host and a repository"),
        ] {
            let refused = repo_url_rule(bad).expect_err(bad);
            assert!(refused.contains(why), "{bad}: {refused}");
        }
    }

    #[test]
    fn a_push_remote_is_a_remote_name_or_empty() {
        for good in ["", "origin", "up-stream_2", "forge.main"] {
            assert!(is_remote_name(good), "{good}");
        }
        for bad in ["-origin", ".hidden", "a b", "a/b", "x;y"] {
            assert!(!is_remote_name(bad), "{bad}");
        }
    }
}
