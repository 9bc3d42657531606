//! Whether one provider's agents are at least as confined as another's: what lets a plan, a
//! redispatch or a task dispatch name a provider. A sandboxed planner that could hand its groups
//! to an unsandboxed provider (or one with more network, or more of the machine shown) would
//! leave its own sandbox by proxy: its groups' agents run what it wrote.

use std::path::Path;

use super::{Network, Provider, Sandbox};

/// `Ok` when agents of `candidate` see no more of the machine than agents of `own` do: `own`
/// unsandboxed allows anything; under bubblewrap, `candidate` must be sandboxed too, with no
/// network where `own` has none, and show read-only only paths `own` shows. Otherwise why not,
/// as a sentence naming both.
pub fn at_least_as_confined(candidate: &Provider, own: &Provider) -> Result<(), String> {
    let (c, o) = (&candidate.name, &own.name);
    if own.sandbox == Sandbox::None {
        return Ok(());
    }
    if candidate.sandbox == Sandbox::None {
        return Err(format!("provider `{c}` runs unsandboxed, and `{o}` runs under a sandbox"));
    }
    if own.network == Network::None && candidate.network != Network::None {
        return Err(format!("provider `{c}` has the machine's network, and `{o}` has none"));
    }
    let shown_by_own = |path: &Path| own.sandbox_paths.iter().any(|shown| path.starts_with(shown));
    if let Some(more) = candidate.sandbox_paths.iter().find(|path| !shown_by_own(path)) {
        return Err(format!("provider `{c}` shows {} in its sandbox, and `{o}` does not", more.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Providers;

    fn providers() -> Providers {
        Providers::parse(
            r#"
            [providers.boxed]
            command = ["sh"]
            sandbox = "bwrap"
            network = "none"
            sandbox_paths = ["/opt/models"]
            [providers.boxed-online]
            command = ["sh"]
            sandbox = "bwrap"
            [providers.boxed-sub]
            command = ["sh"]
            sandbox = "bwrap"
            network = "none"
            sandbox_paths = ["/opt/models/small"]
            [providers.boxed-wide]
            command = ["sh"]
            sandbox = "bwrap"
            network = "none"
            sandbox_paths = ["/"]
            "#,
        )
        .expect("valid")
    }

    fn check(candidate: &str, own: &str) -> Result<(), String> {
        let p = providers();
        at_least_as_confined(p.get(candidate).expect("candidate"), p.get(own).expect("own"))
    }

    #[test]
    fn an_unsandboxed_provider_may_hand_work_to_any_provider() {
        for candidate in ["shell", "claude", "boxed", "boxed-online", "boxed-wide"] {
            assert_eq!(check(candidate, "shell"), Ok(()), "{candidate}");
        }
    }

    #[test]
    fn a_provider_is_as_confined_as_itself_and_as_one_that_shows_less() {
        for name in ["boxed", "boxed-online", "boxed-sub", "boxed-wide"] {
            assert_eq!(check(name, name), Ok(()), "{name}");
        }
        assert_eq!(check("boxed-sub", "boxed"), Ok(()), "a path inside one the own provider shows");
        let refused = check("boxed", "boxed-online").expect_err("shows more");
        assert_eq!(refused, "provider `boxed` shows /opt/models in its sandbox, and `boxed-online` does not");
        assert_eq!(check("boxed-sub", "boxed-wide"), Ok(()), "no network where the own has none");
    }

    #[test]
    fn a_sandboxed_provider_may_not_hand_work_to_an_unsandboxed_one() {
        let refused = check("shell", "boxed").expect_err("shell is unsandboxed");
        assert_eq!(refused, "provider `shell` runs unsandboxed, and `boxed` runs under a sandbox");
    }

    #[test]
    fn a_provider_without_network_may_not_hand_work_to_one_with_it() {
        let refused = check("boxed-online", "boxed").expect_err("more network");
        assert_eq!(refused, "provider `boxed-online` has the machine's network, and `boxed` has none");
    }

    #[test]
    fn a_provider_that_shows_more_of_the_machine_is_less_confined() {
        let refused = check("boxed-wide", "boxed").expect_err("shows /");
        assert_eq!(refused, "provider `boxed-wide` shows / in its sandbox, and `boxed` does not");
    }
}
