//! Optimistic concurrency over a row's `version`: a change made with `If-Match` applies only if
//! the row is still at one of the versions it names.

use super::Error;

/// The versions a caller says it last read (an HTTP `If-Match`), if it said any.
#[derive(Debug, Clone, Default)]
pub struct IfMatch(Option<String>);

impl IfMatch {
    pub fn new(value: Option<&str>) -> IfMatch {
        IfMatch(value.map(str::to_owned))
    }

    /// Ok when there is no `If-Match`, or one of its tags (`"3"`, `3`, or `*`) names `version`.
    pub fn check(&self, what: &str, version: i32) -> Result<(), Error> {
        let Some(raw) = &self.0 else { return Ok(()) };
        let wanted = version.to_string();
        // Bare numbers are accepted as well as quoted tags: scripts send the `version` field.
        let matches = raw
            .split(',')
            .map(str::trim)
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).trim_matches('"') == wanted);
        if matches {
            Ok(())
        } else {
            Err(Error::Stale(format!(
                "If-Match {raw} does not match {what}, which is at version {version}; fetch it again and retry"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_if_match_always_passes() {
        assert!(IfMatch::new(None).check("the project", 7).is_ok());
    }

    #[test]
    fn quoted_bare_weak_and_star_tags_match_their_version() {
        for header in ["\"3\"", "3", "W/\"3\"", "*", "\"1\", \"3\""] {
            assert!(IfMatch::new(Some(header)).check("the project", 3).is_ok(), "{header}");
        }
    }

    #[test]
    fn another_version_is_a_412() {
        for header in ["\"2\"", "4", "\"\"", "abc"] {
            let err = IfMatch::new(Some(header)).check("the project", 3).expect_err(header);
            assert!(matches!(err, Error::Stale(_)), "{header}");
        }
    }
}
