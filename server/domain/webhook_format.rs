//! What a webhook delivery looks like on the wire. `standard` is the event as JSON (Standard
//! Webhooks); `slack` and `ntfy` are ready-made bodies for chat and push services that take a
//! plain POST — a Slack-compatible incoming webhook's `{"text": …}`, and ntfy's text body with
//! `Title` and `Click` headers — each with a link back to the dashboard page that answers it.
//! Every format is signed the same way (the signature covers the body as sent).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    #[default]
    Standard,
    Slack,
    Ntfy,
}

impl WebhookFormat {
    pub const ALL: [WebhookFormat; 3] = [WebhookFormat::Standard, WebhookFormat::Slack, WebhookFormat::Ntfy];

    /// The wire and database name; matches the SQL `CHECK`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WebhookFormat::Standard => "standard",
            WebhookFormat::Slack => "slack",
            WebhookFormat::Ntfy => "ntfy",
        }
    }
}

impl fmt::Display for WebhookFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WebhookFormat {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("webhook format", &Self::ALL, Self::as_str, s)
    }
}

/// A delivery's body as sent, with its content type and the headers its format adds.
#[derive(Debug, PartialEq)]
pub struct Rendered {
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

/// The dashboard page of what an event is about (`wish:login` → `/wishes/login`), if it has one.
pub fn page_of(subject: &str) -> Option<String> {
    let (what, id) = subject.split_once(':')?;
    let base = match what {
        "wish" => "/wishes",
        "agent" => "/agents",
        "board" => "/boards",
        "webhook" => "/webhooks",
        "task" => "/tasks",
        "team" => "/teams",
        _ => return None,
    };
    let id: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    Some(format!("{base}/{id}"))
}

/// The name people know a token or a webhook by, from one of its events' payload: the token's
/// `name`; the webhook's `description`, else its URL's host. `None` for other subjects (their
/// idents are names already, or the dashboard looks them up) and for a payload naming nothing.
pub fn payload_name(subject: &str, payload: &serde_json::Value) -> Option<String> {
    let text = |key: &str| payload.get(key).and_then(|v| v.as_str()).map(str::trim).filter(|s| !s.is_empty());
    match subject.split_once(':')?.0 {
        "token" => text("name").map(str::to_owned),
        "webhook" => text("description").map(str::to_owned).or_else(|| text("url").and_then(url_host)),
        _ => None,
    }
}

/// `https://hooks.slack.com/services/…` → `hooks.slack.com`: where a webhook goes, without the
/// path (which often holds the secret of a chat's incoming webhook).
pub fn url_host(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    Some(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// Renders a delivery's `body` (`{type, timestamp, data: {id, subject, project, payload}}`) in
/// `format`; `dashboard` is the dashboard's address, for the link back.
pub fn render(format: WebhookFormat, body: &serde_json::Value, dashboard: Option<&str>) -> Rendered {
    let json = |value: &serde_json::Value| serde_json::to_vec(value).unwrap_or_default();
    if format == WebhookFormat::Standard {
        return Rendered { content_type: "application/json", body: json(body), headers: Vec::new() };
    }
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let (event_type, subject) = (text(&body["type"]), text(&body["data"]["subject"]));
    let payload = &body["data"]["payload"];
    let said = ["to", "detail", "reason", "question", "result"]
        .iter()
        .filter_map(|key| payload.get(*key).and_then(|v| v.as_str()).map(|v| format!("{key}: {v}")))
        .collect::<Vec<_>>()
        .join(" · ");
    // A token or webhook by its name, never its id.
    let about = payload_name(&subject, payload)
        .map_or_else(|| subject.clone(), |name| format!("{} {name}", subject.split(':').next().unwrap_or_default()));
    let line = if said.is_empty() {
        format!("{event_type} — {about}")
    } else {
        format!("{event_type} — {about} ({said})")
    };
    let link = dashboard.zip(page_of(&subject)).map(|(base, page)| format!("{}{page}", base.trim_end_matches('/')));
    // An agent that starts asking is answered on its page: the notice says who asks, and its
    // action opens that page (the login form first, which comes back to it).
    let asks = match (event_type.as_str(), payload.get("to").and_then(|v| v.as_str())) {
        ("agent.state_changed", Some("permission")) => Some("asks for permission"),
        ("agent.state_changed", Some("question")) => Some("asks a question"),
        _ => None,
    };
    let asker = asks.zip(subject.split_once(':')).map(|(asks, (_, name))| format!("{name} {asks}"));
    let open = if asks.is_some() { "Answer in Switchyard" } else { "Open in Switchyard" };
    match format {
        WebhookFormat::Slack => {
            let text = match &link {
                Some(link) => format!("Switchyard: {line}\n<{link}|{open}>"),
                None => format!("Switchyard: {line}"),
            };
            Rendered {
                content_type: "application/json",
                body: json(&serde_json::json!({ "text": text })),
                headers: Vec::new(),
            }
        }
        _ => {
            // Header values must stay one line of visible ASCII: anything else is left out.
            let header = |v: String| v.chars().filter(|c| c.is_ascii_graphic() || *c == ' ').collect::<String>();
            let title = asker.unwrap_or(event_type);
            let mut headers = vec![("title", header(format!("Switchyard: {title}")))];
            if let (Some(link), true) = (&link, asks.is_some()) {
                headers.push(("actions", header(format!("view, {open}, {link}"))));
            }
            headers.extend(link.map(|link| ("click", header(link))));
            Rendered { content_type: "text/plain; charset=utf-8", body: line.into_bytes(), headers }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery() -> serde_json::Value {
        serde_json::json!({"type": "agent.state_changed", "timestamp": "2026-11-22T09:30:00Z",
            "data": {"id": 42, "subject": "agent:fox", "project": "alpha",
                "payload": {"from": "working", "to": "permission", "detail": "permission to use Bash: rm -rf build"}}})
    }

    #[test]
    fn standard_is_the_event_as_json() {
        let rendered = render(WebhookFormat::Standard, &delivery(), Some("https://sy.example.com"));
        assert_eq!(rendered.content_type, "application/json");
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&rendered.body).unwrap(), delivery());
    }

    #[test]
    fn slack_says_it_in_a_line_with_a_link_to_the_page_that_answers_it() {
        let rendered = render(WebhookFormat::Slack, &delivery(), Some("https://sy.example.com/"));
        let body: serde_json::Value = serde_json::from_slice(&rendered.body).unwrap();
        assert_eq!(
            body["text"],
            "Switchyard: agent.state_changed — agent:fox (to: permission · detail: permission to use Bash: rm -rf build)\n\
             <https://sy.example.com/agents/fox|Answer in Switchyard>"
        );
    }

    #[test]
    fn tokens_and_webhooks_are_named_by_their_name_description_or_host_never_their_id() {
        let event = |subject: &str, payload: serde_json::Value| serde_json::json!({"type": "x.happened", "data": {"subject": subject, "payload": payload}});
        let text = |body: serde_json::Value| {
            let rendered = render(WebhookFormat::Ntfy, &body, None);
            String::from_utf8(rendered.body).unwrap()
        };
        let id = "e4e313d9-5b0c-4c1e-9d52-6f0d8f1d2b3a";
        let token = event(&format!("token:{id}"), serde_json::json!({"name": "ci", "scope": "write"}));
        assert_eq!(text(token), "x.happened — token ci");
        let described = serde_json::json!({"url": "https://hooks.slack.com/services/T0/B0/secret",
            "description": "Deploy alerts", "reason": "failing for 5 days"});
        let webhook = event(&format!("webhook:{id}"), described);
        assert_eq!(text(webhook), "x.happened — webhook Deploy alerts (reason: failing for 5 days)");
        let bare = event(&format!("webhook:{id}"), serde_json::json!({"url": "http://127.0.0.1:9000/hook?k=s"}));
        assert_eq!(text(bare), "x.happened — webhook 127.0.0.1:9000", "the host, never the path or query");
        let unnamed = event(&format!("webhook:{id}"), serde_json::json!({"id": id}));
        assert_eq!(text(unnamed), format!("x.happened — webhook:{id}"), "nothing better to say");
    }

    #[test]
    fn ntfy_is_text_with_a_title_and_a_click_link() {
        let rendered = render(WebhookFormat::Ntfy, &delivery(), Some("https://sy.example.com"));
        assert!(rendered.content_type.starts_with("text/plain"));
        let body = String::from_utf8(rendered.body).unwrap();
        assert!(body.starts_with("agent.state_changed — agent:fox") && body.contains("rm -rf build"), "{body}");
        assert_eq!(
            rendered.headers,
            [
                ("title", "Switchyard: fox asks for permission".to_owned()),
                ("actions", "view, Answer in Switchyard, https://sy.example.com/agents/fox".to_owned()),
                ("click", "https://sy.example.com/agents/fox".to_owned())
            ]
        );
        let done = serde_json::json!({"type": "wish.merged", "data": {"subject": "wish:login", "payload": {}}});
        let rendered = render(WebhookFormat::Ntfy, &done, Some("https://sy.example.com"));
        assert_eq!(
            rendered.headers[0],
            ("title", "Switchyard: wish.merged".to_owned()),
            "other events keep their type"
        );
        assert_eq!(rendered.headers.len(), 2, "and only the click: {:?}", rendered.headers);
        assert_eq!("ntfy".parse(), Ok(WebhookFormat::Ntfy));
        assert!("teams".parse::<WebhookFormat>().is_err());
    }
}
