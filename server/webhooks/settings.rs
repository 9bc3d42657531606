//! The webhook sender's settings, which `config` fills from the command line and tests set
//! directly.

use secrecy::SecretString;

use super::ssrf::AllowList;

/// Webhook settings, validated.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    pub allowed_hosts: AllowList,
    pub retry_schedule: Vec<std::time::Duration>,
    pub disable_after: std::time::Duration,
    pub timeout: std::time::Duration,
    pub github_secret: Option<SecretString>,
    /// Inbound generic hook name → its `whsec_…` secret.
    pub inbound: Vec<(String, SecretString)>,
    /// The dashboard's address, for the link back in `slack` and `ntfy` deliveries (the public
    /// URL, else the API's listen address).
    pub dashboard_url: Option<String>,
}

impl Default for WebhookSettings {
    fn default() -> WebhookSettings {
        WebhookSettings {
            allowed_hosts: AllowList::default(),
            retry_schedule: crate::domain::webhook::default_schedule(),
            disable_after: std::time::Duration::from_secs(5 * 86400),
            timeout: std::time::Duration::from_secs(10),
            github_secret: None,
            inbound: Vec::new(),
            dashboard_url: None,
        }
    }
}
