//! What a Claude Code hook payload says about the agent.
//!
//! `switchyard hook` forwards the JSON Claude Code gives each hook on stdin; the endpoint calls
//! [`signal`] and passes the result to the agent's [`super::Detector`] (or, for
//! [`HookSignal::SessionEnded`], to the worker's finish/suspend path).
//!
//! | `hook_event_name` | signal |
//! | --- | --- |
//! | `SessionStart` | idle |
//! | `UserPromptSubmit`, `PostToolUse`, `PostToolUseFailure` | working |
//! | `PreToolUse` | working; question when the tool is `AskUserQuestion` (its dialog opens next; the only tool Switchyard registers it for) |
//! | `Stop` | idle |
//! | `PermissionRequest` | permission |
//! | `Notification` | by `notification_type`: `permission_prompt` → permission, `elicitation_dialog` → question, `idle_prompt` → idle; older payloads without it by `message` |
//! | `SessionEnd` | session ended (not with `reason: clear` or `resume`, which start the next session in the same pane); its `reason` (`logout`, `prompt_input_exit`, or `other` for a signal: the pane killed) does not say whether the pane goes on, so whether the agent finished is decided by the caller |
//! | `SubagentStop`, `PreCompact`, others | none: a subagent finishing says nothing about the main agent, which goes on with its turn |

use serde_json::Value;

use crate::domain::agent::Activity;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookSignal {
    Activity(Activity),
    /// Claude Code exited (`/exit`, logout, the pane closing): finish or suspend the agent.
    SessionEnded,
}

/// The signal in one hook payload, or `None` when the hook says nothing about the state.
pub fn signal(payload: &Value) -> Option<HookSignal> {
    let field = |name: &str| payload.get(name).and_then(Value::as_str);
    let activity = match field("hook_event_name")? {
        "SessionStart" | "Stop" => Activity::Idle,
        "UserPromptSubmit" | "PostToolUse" | "PostToolUseFailure" => Activity::Working,
        "PreToolUse" if field("tool_name") == Some("AskUserQuestion") => Activity::Question,
        "PreToolUse" => Activity::Working,
        "PermissionRequest" => Activity::Permission,
        "Notification" => notification(field("notification_type"), field("message").unwrap_or_default())?,
        // `/clear` and `/resume` end one session and start the next in the same pane: not the end
        // of the agent.
        "SessionEnd" if matches!(field("reason"), Some("clear" | "resume")) => return None,
        "SessionEnd" => return Some(HookSignal::SessionEnded),
        _ => return None,
    };
    Some(HookSignal::Activity(activity))
}

fn notification(kind: Option<&str>, message: &str) -> Option<Activity> {
    match kind {
        Some("permission_prompt") => Some(Activity::Permission),
        Some("elicitation_dialog") => Some(Activity::Question),
        Some("idle_prompt") => Some(Activity::Idle),
        Some(_) => None,
        // Before `notification_type` existed: "Claude needs your permission to use Bash",
        // "Claude is waiting for your input".
        None if message.contains("permission") => Some(Activity::Permission),
        None if message.contains("waiting for your input") => Some(Activity::Idle),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(name: &str) -> Value {
        json!({ "session_id": "0b6c", "transcript_path": "/tmp/t.jsonl", "cwd": "/src", "hook_event_name": name })
    }

    fn activity(a: Activity) -> Option<HookSignal> {
        Some(HookSignal::Activity(a))
    }

    #[test]
    fn lifecycle_hooks_map_to_working_and_idle() {
        assert_eq!(signal(&event("SessionStart")), activity(Activity::Idle));
        assert_eq!(signal(&event("UserPromptSubmit")), activity(Activity::Working));
        assert_eq!(signal(&event("PostToolUse")), activity(Activity::Working));
        assert_eq!(signal(&event("Stop")), activity(Activity::Idle));
        assert_eq!(signal(&event("SessionEnd")), Some(HookSignal::SessionEnded));
        let clear = serde_json::json!({"hook_event_name": "SessionEnd", "reason": "clear"});
        assert_eq!(signal(&clear), None, "/clear starts the next session in the same pane");
    }

    #[test]
    fn a_tool_about_to_run_is_work_unless_it_asks_the_user() {
        let mut bash = event("PreToolUse");
        bash["tool_name"] = json!("Bash");
        assert_eq!(signal(&bash), activity(Activity::Working));
        let mut ask = event("PreToolUse");
        ask["tool_name"] = json!("AskUserQuestion");
        assert_eq!(signal(&ask), activity(Activity::Question));
    }

    #[test]
    fn permission_requests_and_notifications_map_by_type() {
        assert_eq!(signal(&event("PermissionRequest")), activity(Activity::Permission));
        for (kind, expected) in [
            ("permission_prompt", activity(Activity::Permission)),
            ("elicitation_dialog", activity(Activity::Question)),
            ("idle_prompt", activity(Activity::Idle)),
            ("auth_success", None),
        ] {
            let mut n = event("Notification");
            n["notification_type"] = json!(kind);
            n["message"] = json!("anything");
            assert_eq!(signal(&n), expected, "{kind}");
        }
    }

    #[test]
    fn older_notifications_are_read_by_their_message() {
        let mut n = event("Notification");
        n["message"] = json!("Claude needs your permission to use Bash");
        assert_eq!(signal(&n), activity(Activity::Permission));
        n["message"] = json!("Claude is waiting for your input");
        assert_eq!(signal(&n), activity(Activity::Idle));
    }

    #[test]
    fn unknown_or_malformed_payloads_say_nothing() {
        assert_eq!(signal(&event("SubagentStop")), None);
        assert_eq!(signal(&event("PreCompact")), None);
        assert_eq!(signal(&json!({ "hook_event_name": 3 })), None);
        assert_eq!(signal(&json!("Stop")), None);
    }
}
