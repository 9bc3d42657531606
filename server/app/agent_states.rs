//! Why an agent is in the state it is in: which signal decided it (a Claude Code hook, a screen
//! rule, pane output, the reconciler, a person), when, and what the other signals say now — the
//! last hook, the last pane activity, and the screen read now with the provider's rules when
//! this process can reach the pane. Peers' most common complaint is an agent shown "working"
//! while it waits on a prompt; this says where that came from.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{agent_panes, Ctx, Error, Result};
use crate::db::agents::{self, Agent};
use crate::db::events;
use crate::detect::screen::{self, ReadContext, ScreenRules};
use crate::domain::agent::AgentState;

/// The signal of a shell kept working by a program in its foreground
/// ([`crate::detect::decision::Detector::on_busy`]).
const FOREGROUND: &str = "foreground command";

/// The explanation of an agent's current state.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "state": "idle", "since": "2026-11-22T09:30:00Z",
    "decided_by": "hook", "signal": "Stop", "line": null, "detail": null, "from": "working",
    "last_hook": {"state": "idle", "at": "2026-11-22T09:30:00Z"}, "last_activity": "2026-11-22T09:30:00Z",
    "screen": {"rules": "claude", "activity": "working", "rule": "spinner", "line": "✻ Thinking…", "error": null, "foreground": null},
    "summary": "idle since 2026-11-22 09:30:00 UTC, decided by a hook (Stop); the screen now reads working: the next reading decides"}))]
pub struct Explanation {
    pub agent: String,
    pub state: AgentState,
    /// When it entered this state (its last `agent.state_changed`); `None` if it never changed.
    pub since: Option<DateTime<Utc>>,
    /// What decided it: `hook`, `screen`, `control` (pane output), `reconciler`, `worker`, `api`, `answer` (a menu answered through Switchyard).
    pub decided_by: Option<String>,
    /// Which signal it was, when its source names them: the hook's event (`Stop`), or the
    /// screen rule that matched (`spinner`, `permission dialog`, `selection dialog`, …).
    pub signal: Option<String>,
    /// The screen line that rule matched, when the screen decided.
    pub line: Option<String>,
    /// What came with it (the permission asked, the screen's error, a person's reason).
    pub detail: Option<String>,
    pub from: Option<AgentState>,
    pub last_hook: Option<HookSignal>,
    /// The last sign of life: a hook or pane output.
    pub last_activity: Option<DateTime<Utc>>,
    /// The pane read now with the provider's screen rules; `None` when no pane is reachable here.
    pub screen: Option<ScreenSignal>,
    /// All of it in one sentence, for the agent's page.
    pub summary: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HookSignal {
    /// The state the last hook meant (hooks that mean none leave it as it was).
    pub state: Option<AgentState>,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ScreenSignal {
    /// The provider's rules that read it (`claude`, `codex`, `gemini`, `generic`).
    pub rules: String,
    /// What a marker on the screen says (`working`, `permission`, `question`, `idle`); `null`
    /// when none shows: idle once two readings are the same.
    pub activity: Option<String>,
    /// The rule that found that marker (`spinner`, `permission dialog`, …).
    pub rule: Option<String>,
    /// The line it found it on.
    pub line: Option<String>,
    /// A final error the provider printed.
    pub error: Option<String>,
    /// For a shell agent: the program running in its foreground, when it is not the shell
    /// (`cargo`): the agent is working until it ends, however still the screen is.
    pub foreground: Option<String>,
}

/// Explains agent `name`'s state.
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn explain(ctx: &Ctx, name: &str) -> Result<Explanation> {
    let mut conn = ctx.db.acquire().await?;
    let agent = agents::by_name(&mut conn, name).await?.ok_or_else(|| Error::NotFound(format!("no agent `{name}`")))?;
    let last = events::latest(&mut conn, &agents::subject(name), "agent.state_changed").await?;
    drop(conn);
    let last = last.as_ref();
    let text = |key: &str| last.and_then(|e| e.payload.get(key)).and_then(|v| v.as_str()).map(str::to_owned);
    let screen = if agent.state.is_live() { read_screen(ctx, &agent).await } else { None };
    let mut explanation = Explanation {
        agent: agent.name.clone(),
        state: agent.state,
        since: last.map(|e| e.created_at),
        decided_by: text("source"),
        signal: text("signal"),
        line: text("line"),
        detail: text("detail"),
        from: text("from").and_then(|s| s.parse().ok()),
        last_hook: agent.last_hook_at.map(|at| HookSignal { state: agent.last_hook_state, at }),
        last_activity: agent.last_activity,
        screen,
        summary: String::new(),
    };
    explanation.summary = summary(&explanation);
    Ok(explanation)
}

/// The pane read now, when this process runs the worker that holds it, with the rules the
/// worker reads it with (a provider gone from the config: none, as there).
async fn read_screen(ctx: &Ctx, agent: &Agent) -> Option<ScreenSignal> {
    let rules = ctx.providers.current().get(&agent.provider).map_or(ScreenRules::Generic, |p| p.screen_rules);
    let text = agent_panes::screen(ctx, &agent.name, 0).await.ok()?.text;
    let foreground = agent_panes::foreground_command(ctx, agent).await;
    let reading = screen::read(rules, &text, &ReadContext { now: Utc::now(), zone: chrono_tz::Tz::UTC });
    Some(ScreenSignal {
        rules: rules.as_str().to_owned(),
        activity: reading.activity.map(|a| a.state().as_str().to_owned()),
        rule: reading.matched.as_ref().map(|m| m.rule.to_owned()),
        line: reading.matched.map(|m| m.line),
        error: reading.error,
        foreground,
    })
}

/// "idle since …, decided by a hook (Stop); the last hook said idle; the screen now reads working".
fn summary(e: &Explanation) -> String {
    let mut parts = vec![match (&e.since, &e.decided_by) {
        (Some(since), Some(by)) => {
            let what = match by.as_str() {
                "hook" => "a Claude Code hook",
                "screen" => "a screen rule",
                "control" => "pane output",
                "reconciler" => "the reconciler (tmux against the records)",
                "worker" => "the worker",
                "api" => "a person or script through the API",
                "answer" => "an answer to its menu (the menu closed with the chosen option)",
                other => other,
            };
            let line = e.line.as_ref().map(|line| match e.signal.as_deref() {
                // The worker's busy shell: the "line" is the command in its foreground.
                Some(FOREGROUND) => format!("`{line}` running"),
                _ => format!("on the line “{line}”"),
            });
            let said: Vec<&str> =
                [e.signal.as_deref(), line.as_deref(), e.detail.as_deref()].into_iter().flatten().collect();
            let detail = if said.is_empty() { String::new() } else { format!(" ({})", said.join(": ")) };
            format!("{} since {}, decided by {what}{detail}", e.state, since.format("%Y-%m-%d %H:%M:%S UTC"))
        }
        _ => format!("{} since it was registered", e.state),
    }];
    if let Some(hook) = &e.last_hook {
        let said = hook.state.map_or("no state".to_owned(), |s| s.to_string());
        parts.push(format!("the last hook said {said} at {}", hook.at.format("%H:%M:%S")));
    }
    match &e.screen {
        Some(ScreenSignal { foreground: Some(command), .. }) => {
            parts.push(format!("`{command}` runs in the shell's foreground: working until it ends"))
        }
        Some(ScreenSignal { error: Some(error), .. }) => parts.push(format!("the screen shows an error: {error}")),
        Some(ScreenSignal { activity: Some(activity), rule, line, .. }) => {
            let why = match (rule, line) {
                (Some(rule), Some(line)) => format!(" ({rule} on the line “{line}”)"),
                _ => String::new(),
            };
            parts.push(format!("the screen now reads {activity}{why}"))
        }
        Some(_) => parts.push("no marker shows on the screen now (idle once it stays unchanged)".to_owned()),
        None => parts.push("its screen cannot be read from here".to_owned()),
    }
    parts.join("; ")
}
