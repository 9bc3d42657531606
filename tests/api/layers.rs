//! The dependency rule of `server/`: `api`, `pages`, `worker` → `app` → `db`, `git`, `tmux`,
//! `providers` → `domain`. A layer that names a layer above it (or, for `api`, a sibling way in)
//! fails here with the file and line, so the rule holds without anyone remembering it.

use std::path::{Path, PathBuf};

/// Each layer and the modules it must not name.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("app", &["api", "pages", "worker", "merge_queue", "http", "cli"]),
    ("api", &["pages", "worker", "merge_queue", "cli"]),
    ("worker", &["api", "pages", "merge_queue", "http", "cli"]),
    ("merge_queue", &["api", "pages", "worker", "http", "cli"]),
    ("db", &["app", "api", "pages", "worker", "merge_queue", "http", "git", "cli"]),
    ("git", &["app", "api", "pages", "worker", "merge_queue", "http", "db", "cli"]),
    ("tmux", &["app", "api", "pages", "worker", "merge_queue", "http", "db", "cli"]),
    ("providers", &["app", "api", "pages", "worker", "merge_queue", "http", "cli"]),
    ("domain", &["app", "api", "pages", "worker", "merge_queue", "http", "db", "git", "tmux", "cli"]),
];

fn rust_files(path: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        files.push(path.to_path_buf());
    }
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read dir") {
            files.extend(rust_files(&entry.expect("entry").path()));
        }
    }
    files
}

/// The modules a line names as `crate::<module>`, including inside `use crate::{a, b::{c}}`.
fn named_modules(line: &str) -> Vec<String> {
    let ident = |text: &str| -> String { text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut named = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        let rest = &line[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            named.push(ident(rest));
            continue;
        };
        // The group's top-level items: each starts with the module it names.
        let mut depth = 0;
        let mut start = true;
        for c in group.char_indices() {
            match c.1 {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c2 if start && !c2.is_whitespace() => {
                    named.push(ident(&group[c.0..]));
                    start = false;
                }
                _ => {}
            }
        }
    }
    named.retain(|m| !m.is_empty());
    named
}

#[test]
fn every_layer_names_only_the_layers_below_it() {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("server");
    let mut broken = Vec::new();
    for (layer, forbidden) in FORBIDDEN {
        let mut files = rust_files(&server.join(layer));
        files.extend(rust_files(&server.join(format!("{layer}.rs"))));
        assert!(!files.is_empty(), "no source for layer `{layer}`");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read");
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for module in named_modules(code) {
                    if forbidden.contains(&module.as_str()) {
                        broken.push(format!("{}:{}: `{layer}` names `crate::{module}`", file.display(), number + 1));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "dependencies must point down:\n{}", broken.join("\n"));
}

#[test]
fn the_check_sees_plain_and_grouped_uses() {
    assert_eq!(named_modules("use crate::api::error::ApiError;"), ["api"]);
    assert_eq!(named_modules("use crate::{db, worker::fleet};"), ["db", "worker"]);
    assert_eq!(named_modules("use crate::{db::{a, b}, pages};"), ["db", "pages"]);
    assert_eq!(named_modules("let x = crate::pages::render(y);"), ["pages"]);
    assert!(named_modules("use super::Error;").is_empty());
}
