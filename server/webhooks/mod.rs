//! Outgoing webhooks: Standard Webhooks signatures, the SSRF guard on where deliveries may go,
//! and the delivery loop that drains the outbox (`webhook_deliveries`).

pub mod ranges;
pub mod sender;
pub mod signature;
pub mod ssrf;

pub use sender::{Sender, TickOutcome};
