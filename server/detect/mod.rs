//! State detection: what an agent is doing, from what its pane shows and what its hooks say.
//!
//! Pure code — no I/O, no database, no tmux — so every rule is tested against fixtures of real
//! screens (`tests/fixtures/screens/`). The worker owns one [`Detector`] per agent and feeds it:
//!
//! - [`Detector::on_output`] when control mode reports `%output` for the pane,
//! - [`Detector::on_screen`] with a fresh `capture-pane` after output (and at
//!   [`Detector::next_reading_at`], which confirms idle and lets the screen answer a hook),
//! - [`Detector::on_hook`] with [`hooks::signal`] of each Claude Code hook payload.
//!
//! Each returns `Some(`[`Decision`]`)` only when what the worker writes changes.
//!
//! - [`ansi`]: escape and control codes out.
//! - [`screen`]: one reading of one screen, per provider ([`ScreenRules`]).
//! - [`reset`]: usage-limit reset times.
//! - [`decision`]: the arbiter.
//! - [`hooks`]: hook payloads to signals.
//! - [`input_line`]: what is typed in a pane's input line (for message delivery).

pub mod ansi;
pub mod decision;
pub mod hooks;
pub mod input_line;
pub mod prompt;
pub mod reset;
pub mod screen;

#[cfg(test)]
mod decision_tests;
#[cfg(test)]
mod fixture_tests;

pub use decision::{Decision, Detector, DetectorConfig, Disagreement, Source, HOOK_PRECEDENCE, SETTLE};
pub use hooks::{signal, HookSignal};
pub use screen::{read, ReadContext, ScreenReading, ScreenRules};
