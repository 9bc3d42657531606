//! The dependency rule of `server/`, read from the `crate::` and `super::` paths each file names
//! (comments and tests aside): every top-level module is placed in [`ALLOWED`] with the modules it
//! may name, so a new module fails here until it is placed, and a name outside its list fails with
//! the file; and no module names its way back to itself, between the top-level modules or between
//! the modules of `app/`. The same check from a shell: `cargo test --test api layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and the top-level modules it may name. Roughly, bottom up: `domain`
/// (pure rules) and small helpers; `db`, `git`, `tmux`, `providers`, `detect`; `app` (the use
/// cases, git work included); then the ways in — `http` with `api` and `pages` above it, and
/// `worker`, the one home of the background loops, whose git work is `app`'s (it names no `git`)
/// and no `db`: its loops read and record through `app`) — and at the top `routes`, `config`, `cli`.
const ALLOWED: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("programs", &[]),
    ("agent_writable", &[]),
    ("auth", &["domain"]),
    ("data_dir", &[]),
    ("node", &["domain"]),
    ("detect", &["domain"]),
    ("tmux", &["programs", "domain"]),
    ("git", &["agent_writable", "domain", "programs"]),
    ("providers", &["detect", "domain", "programs"]),
    ("db", &["auth", "data_dir", "domain"]),
    ("metrics", &["db", "domain"]),
    ("feed", &["db", "domain"]),
    ("message_log", &["db", "domain"]),
    ("webhooks", &["domain"]),
    (
        "app",
        &[
            "agent_writable",
            "auth",
            "db",
            "detect",
            "domain",
            "feed",
            "git",
            "message_log",
            "node",
            "programs",
            "providers",
            "tmux",
            "webhooks",
        ],
    ),
    ("http", &["app", "auth", "db", "domain", "feed", "metrics", "webhooks"]),
    ("api", &["app", "auth", "db", "detect", "domain", "feed", "git", "http", "providers", "tmux", "webhooks"]),
    ("pages", &["app", "auth", "db", "detect", "domain", "feed", "git", "http", "providers", "tmux", "webhooks"]),
    (
        "worker",
        &[
            "agent_writable",
            "app",
            "data_dir",
            "detect",
            "domain",
            "feed",
            "node",
            "programs",
            "providers",
            "tmux",
            "webhooks",
        ],
    ),
    ("status", &["db", "domain", "metrics", "node", "providers", "worker"]),
    ("routes", &["api", "http", "pages"]),
    ("config", &["app", "db", "domain", "http", "providers", "webhooks", "worker"]),
    ("telemetry", &["config"]),
    ("cli", &["app", "auth", "config", "data_dir", "db", "domain", "feed", "tmux"]),
];

/// A module's path from the crate root: `["app", "conductor", "review"]`.
type ModulePath = Vec<String>;

/// The `.rs` files under `dir`, each with its module path.
fn modules(dir: &Path, prefix: &ModulePath) -> Vec<(PathBuf, ModulePath)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").map(|e| e.expect("entry").path()) {
        let name = entry.file_stem().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let mut path = prefix.clone();
        if entry.is_dir() {
            path.push(name);
            found.extend(modules(&entry, &path));
        } else if entry.extension().is_some_and(|e| e == "rs") {
            if name != "mod" && !(prefix.is_empty() && ["lib", "main", "build"].contains(&name.as_str())) {
                path.push(name);
            }
            found.push((entry, path));
        }
    }
    found
}

/// The code of a file that the check reads: without comments, and without its tests (a
/// `#[cfg(test)]` item at the end, or a file of tests).
fn code_of(file: &Path) -> String {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(file).expect("read");
    let text = text.split("\n#[cfg(test)]").next().unwrap_or_default();
    text.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The paths of a use-tree starting at `text` (`a::b`, `a::{b, c::{d}}`, `a::b as c`), each as
/// far as its segments go, and how much of `text` it took.
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut paths: Vec<Vec<String>> = vec![Vec::new()];
    let mut at = 0;
    let bytes = text.as_bytes();
    while at < bytes.len() {
        if bytes[at] == b'{' {
            at += 1;
            let mut inner = Vec::new();
            while at < bytes.len() && bytes[at] != b'}' {
                if bytes[at].is_ascii_whitespace() || bytes[at] == b',' {
                    at += 1;
                    continue;
                }
                let (sub, took) = use_tree(&text[at..]);
                inner.extend(sub.into_iter().filter(|p| !p.is_empty()));
                at += took.max(1);
            }
            let inner = if inner.is_empty() { vec![Vec::new()] } else { inner };
            let joined =
                paths.iter().flat_map(|p| inner.iter().map(move |q| [p.clone(), q.clone()].concat())).collect();
            return (joined, at + 1);
        }
        let segment: String = text[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if segment.is_empty() {
            break;
        }
        at += segment.len();
        paths.iter_mut().for_each(|p| p.push(segment.clone()));
        if text[at..].starts_with("::") {
            at += 2;
            continue;
        }
        // `a as b`: the path is `a`'s.
        let rest = text[at..].trim_start();
        if let Some(alias) = rest.strip_prefix("as ") {
            let name = alias.trim_start();
            let ident = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').count();
            at = text.len() - name.len() + ident;
        }
        break;
    }
    (paths, at)
}

/// The module paths `code` (of the module at `from`) names through `crate::` and `super::`.
fn named(code: &str, from: &ModulePath) -> Vec<ModulePath> {
    let mut found = Vec::new();
    for (start, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let (paths, _) = use_tree(&code[start..]);
        for path in paths {
            let mut resolved: ModulePath = Vec::new();
            let mut rest = path.as_slice();
            if rest.first().is_some_and(|s| s == "crate") {
                rest = &rest[1..];
            } else {
                // `super` from a module is its parent; each further `super` one more up.
                let ups = rest.iter().take_while(|s| *s == "super").count();
                resolved = from[..from.len().saturating_sub(ups)].to_vec();
                rest = &rest[ups..];
            }
            resolved.extend(rest.iter().cloned());
            found.push(resolved);
        }
    }
    found
}

/// Edges between the children of `parent` (top-level modules for `[]`): which child names which,
/// with the files that do.
fn edges(parent: &[&str]) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("server");
    let parent: ModulePath = parent.iter().map(|s| (*s).to_owned()).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (file, module) in modules(&server, &Vec::new()) {
        if module.len() <= parent.len() || !module.starts_with(&parent) {
            continue;
        }
        let child = &module[parent.len()];
        for target in named(&code_of(&file), &module) {
            let Some(other) = target.get(parent.len()).filter(|_| target.starts_with(&parent)) else { continue };
            // A type or function of the parent itself (`crate::Application`, `super::Ctx`) is no module.
            if other != child && !other.starts_with(|c: char| c.is_uppercase()) {
                let shown = file.strip_prefix(&server).unwrap_or(&file).display().to_string();
                edges.entry(child.clone()).or_default().entry(other.clone()).or_default().insert(shown);
            }
        }
    }
    edges
}

/// The modules of each cycle in `edges` (strongly connected components of more than one).
fn cycles(edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<Vec<String>> {
    // Two modules are in one cycle when each reaches the other.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(next) = todo.pop() {
            for to in edges.get(&next).map(|e| e.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                if seen.insert(to.clone()) {
                    todo.push(to);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = edges.keys().map(|m| (m, reach(m))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for (module, reaches) in &reached {
        if !reaches.contains(*module) || found.iter().any(|c| c.contains(module)) {
            continue;
        }
        let cycle = reached
            .iter()
            .filter(|(other, back)| reaches.contains(**other) && back.contains(*module))
            .map(|(other, _)| (*other).clone())
            .collect();
        found.push(cycle);
    }
    found
}

/// A cycle shown with the files that close it.
fn described(cycle: &[String], edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> String {
    let mut lines = vec![format!("cycle: {}", cycle.join(", "))];
    for from in cycle {
        for (to, files) in edges.get(from).into_iter().flatten().filter(|(to, _)| cycle.contains(to)) {
            let shown: Vec<String> = files.iter().take(3).cloned().collect();
            let more = files.len().saturating_sub(shown.len());
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            lines.push(format!("  {from} -> {to}: {}{more}", shown.join(", ")));
        }
    }
    lines.join("\n")
}

#[test]
fn every_top_level_module_is_placed_and_names_only_what_it_may() {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("server");
    let placed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let present: BTreeSet<String> =
        modules(&server, &Vec::new()).into_iter().filter_map(|(_, m)| m.first().cloned()).collect();
    let unplaced: Vec<&String> = present.iter().filter(|m| !placed.contains_key(m.as_str())).collect();
    assert!(unplaced.is_empty(), "place each new top-level module in ALLOWED (tests/api/layers.rs): {unplaced:?}");
    let mut broken = Vec::new();
    for (from, named) in edges(&[]) {
        let allowed = placed.get(from.as_str()).copied().unwrap_or_default();
        for (to, files) in named.iter().filter(|(to, _)| present.contains(*to) && !allowed.contains(&to.as_str())) {
            broken.push(format!("`{from}` names `{to}`: {}", files.iter().cloned().collect::<Vec<_>>().join(", ")));
        }
    }
    assert!(broken.is_empty(), "dependencies outside ALLOWED (tests/api/layers.rs):\n{}", broken.join("\n"));
}

#[test]
fn no_cycle_between_the_top_level_modules_or_inside_app() {
    for parent in [&[][..], &["app"][..]] {
        let edges = edges(parent);
        let found: Vec<String> = cycles(&edges).iter().map(|c| described(c, &edges)).collect();
        assert!(
            found.is_empty(),
            "modules under `server/{}` name their way back:\n{}",
            parent.join("/"),
            found.join("\n")
        );
    }
}

#[test]
fn the_check_reads_plain_grouped_nested_and_relative_paths() {
    let at = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    let app_wishes = at("app::wishes");
    assert_eq!(named("use crate::api::error::ApiError;", &app_wishes), [at("api::error::ApiError")]);
    assert_eq!(
        named("use crate::{db, worker::{fleet, spawner as s}};", &app_wishes),
        [at("db"), at("worker::fleet"), at("worker::spawner")]
    );
    assert_eq!(named("let x = crate::pages::render(y);", &app_wishes), [at("pages::render")]);
    assert_eq!(named("use super::groups::act;", &app_wishes), [at("app::groups::act")]);
    assert_eq!(named("use super::super::tasks;", &at("app::conductor::review")), [at("app::tasks")]);
    assert_eq!(
        named("use crate::app::{\n    agents,\n    tasks as t,\n};", &app_wishes),
        [at("app::agents"), at("app::tasks")]
    );
}

#[test]
fn a_cycle_is_found_and_a_chain_is_not() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (from, to) in pairs {
            edges.entry((*from).to_owned()).or_default().entry((*to).to_owned()).or_default().insert("f.rs".into());
        }
        edges
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
    assert_eq!(cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])), [["a", "b", "c"]]);
}
