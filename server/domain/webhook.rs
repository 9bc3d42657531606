//! Which events a webhook subscription (or a live stream) wants, and when a failed delivery is
//! tried again. Pure rules: the database and the sender apply them.
//!
//! A subscription's `events` mixes three kinds of entry:
//! - an event type, e.g. `task.completed`;
//! - a pattern `prefix.*`, e.g. `task.*` (or `*` alone: everything);
//! - a multiclaude hook name, mapped to Switchyard's events (see [`HOOKS`]).

use std::time::Duration;

/// multiclaude's hook names and the events each stands for.
pub const HOOKS: &[(&str, &str)] = &[
    ("on_event", "every event"),
    ("on_agent_started", "agent.spawned"),
    ("on_agent_idle", "agent.state_changed with payload.to = idle"),
    ("on_agent_stopped", "agent.stopped"),
    ("on_worker_stuck", "agent.stuck"),
    ("on_message_sent", "message.delivered"),
    ("on_merge_complete", "merge.completed and wish.merged"),
    ("on_pr_created", "pr.created"),
    ("on_ci_failed", "ci.failed"),
    ("on_task_assigned", "task.assigned, and task.started with an assignee"),
];

/// Event type prefixes Switchyard writes; a name outside them is refused as a likely typo.
const KNOWN_PREFIXES: &[&str] = &[
    "task",
    "task_run",
    "wish",
    "project",
    "board",
    "board_template",
    "token",
    "agent",
    "message",
    "team",
    "chat",
    "merge",
    "pr",
    "ci",
    "webhook",
    "test",
];

/// A validated list of event entries. It matches an event when any entry does. PostgreSQL
/// matches it for the webhook outbox (`webhook_wants`, migration 0012); the live streams match
/// it here ([`EventFilter::wants`]), on the events one reader fetched for all of them. A test
/// holds the two to the same answers (`tests/api/event_stream.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter(Vec<String>);

/// An entry that is not an event type, a `prefix.*` pattern or a hook name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("events[{index}]: `{entry}` is not an event type, a `prefix.*` pattern or a hook name")]
pub struct UnknownEntry {
    pub index: usize,
    pub entry: String,
}

impl EventFilter {
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<EventFilter, UnknownEntry> {
        for (index, entry) in entries.iter().enumerate() {
            let entry = entry.as_ref();
            if !is_known(entry) {
                return Err(UnknownEntry { index, entry: entry.to_owned() });
            }
        }
        Ok(EventFilter(entries.iter().map(|e| e.as_ref().to_owned()).collect()))
    }

    /// The entries, for `webhook_wants`.
    pub fn entries(&self) -> &[String] {
        &self.0
    }

    /// Whether an event of this type and payload is wanted: `webhook_wants` in Rust.
    pub fn wants(&self, event_type: &str, payload: &serde_json::Value) -> bool {
        let has = |entry: &str| self.0.iter().any(|e| e == entry);
        let kind = event_type.split('.').next().unwrap_or(event_type);
        if has("*") || has("on_event") || has(event_type) || self.0.iter().any(|e| e.strip_suffix(".*") == Some(kind)) {
            return true;
        }
        let hook = match event_type {
            "agent.spawned" => "on_agent_started",
            "agent.state_changed" if payload.get("to").and_then(|v| v.as_str()) == Some("idle") => "on_agent_idle",
            "agent.stopped" => "on_agent_stopped",
            "agent.stuck" => "on_worker_stuck",
            "message.delivered" => "on_message_sent",
            "merge.completed" | "wish.merged" => "on_merge_complete",
            "pr.created" => "on_pr_created",
            "ci.failed" => "on_ci_failed",
            "task.assigned" => "on_task_assigned",
            "task.started" if payload.get("assignee").is_some_and(|a| !a.is_null()) => "on_task_assigned",
            _ => return false,
        };
        has(hook)
    }
}

/// `*`, a hook name, a `prefix.*` pattern of a known prefix, or a plausible event type.
fn is_known(entry: &str) -> bool {
    if entry == "*" || HOOKS.iter().any(|(hook, _)| *hook == entry) {
        return true;
    }
    if let Some(prefix) = entry.strip_suffix(".*") {
        return KNOWN_PREFIXES.contains(&prefix);
    }
    entry.split_once('.').is_some_and(|(prefix, rest)| {
        KNOWN_PREFIXES.contains(&prefix)
            && !rest.is_empty()
            && rest.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    })
}

/// Standard Webhooks' schedule after the first failure: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
pub fn default_schedule() -> Vec<Duration> {
    [5, 300, 1800, 7200, 18000, 36000, 36000].into_iter().map(Duration::from_secs).collect()
}

/// The wait before attempt `attempts + 1`, after `attempts` failures; `None` once the schedule
/// is used up (the delivery has failed for good). `jitter` in [0, 1) spreads retries ±10% so
/// many endpoints recovering at once are not hit in lock-step. A `Retry-After` from the receiver
/// is honoured when it asks for longer.
pub fn next_retry(
    schedule: &[Duration],
    attempts: u32,
    jitter: f64,
    retry_after: Option<Duration>,
) -> Option<Duration> {
    let base = *schedule.get((attempts as usize).checked_sub(1)?)?;
    let spread = base.mul_f64(0.9 + 0.2 * jitter.clamp(0.0, 1.0));
    Some(match retry_after {
        Some(asked) => spread.max(asked.min(Duration::from_secs(24 * 3600))),
        None => spread,
    })
}

/// `Retry-After` as seconds or an HTTP date, relative to `now`.
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&chrono::Utc) - now).to_std().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_entry_is_named_with_its_index() {
        let err = EventFilter::parse(&["task.created", "on_agent_sleepy"]).unwrap_err();
        assert_eq!(err, UnknownEntry { index: 1, entry: "on_agent_sleepy".into() });
        assert!(EventFilter::parse(&["nope.*"]).is_err());
        assert!(EventFilter::parse(&["task."]).is_err());
        let all_kinds = ["*", "on_agent_idle", "task.*", "wish.merged"];
        assert_eq!(EventFilter::parse(&all_kinds).expect("valid").entries(), all_kinds);
    }

    #[test]
    fn retries_follow_the_schedule_with_bounded_jitter_then_stop() {
        let schedule = default_schedule();
        assert_eq!(next_retry(&schedule, 0, 0.5, None), None);
        let first = next_retry(&schedule, 1, 0.0, None).expect("retry");
        assert!(first >= Duration::from_millis(4500) && first <= Duration::from_millis(5500), "{first:?}");
        let late = next_retry(&schedule, 1, 0.999, None).expect("retry");
        assert!(late <= Duration::from_millis(5500));
        assert!(next_retry(&schedule, 2, 0.5, None).expect("retry") >= Duration::from_secs(270));
        assert_eq!(next_retry(&schedule, 8, 0.5, None), None);
    }

    #[test]
    fn a_longer_retry_after_wins_and_is_capped() {
        let schedule = [Duration::from_secs(5)];
        assert_eq!(next_retry(&schedule, 1, 0.5, Some(Duration::from_secs(60))), Some(Duration::from_secs(60)));
        assert_eq!(next_retry(&schedule, 1, 0.5, Some(Duration::from_secs(1))), Some(Duration::from_secs(5)));
        let capped = next_retry(&schedule, 1, 0.5, Some(Duration::from_secs(10 * 86400))).expect("retry");
        assert_eq!(capped, Duration::from_secs(86400));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2025-01-15T10:30:00Z").expect("date").to_utc();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 15 Jan 2025 10:31:00 GMT", now), Some(Duration::from_secs(60)));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
