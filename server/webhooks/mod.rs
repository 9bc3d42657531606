//! Outgoing webhooks: Standard Webhooks signatures, the SSRF guard on where deliveries may go,
//! and the sender's settings (its use cases are `app::webhook_deliveries`, its loops
//! `worker::webhook_sender`).

pub mod ranges;
pub mod settings;
pub mod signature;
pub mod ssrf;

pub use settings::WebhookSettings;
