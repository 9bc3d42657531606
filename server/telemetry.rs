//! Logging: text for a terminal, JSON for a collector; `RUST_LOG` overrides the levels.
//!
//! What a log line may hold: user text (a path parameter, a name) goes into fields with `?`
//! (Debug), which escapes newlines and `ESC`, so no request can forge a line or colour a
//! terminal. Colours only when stderr is a terminal (and `NO_COLOR` is unset): a file or a
//! collector gets no escape codes. A client's error (4xx) is the client's: the handlers and use
//! cases log their errors at `debug`, and a 5xx's cause is logged once, at `error`
//! (`http::log_internal_errors`, and the trace layer's failures, which are 5xx only).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let ansi = colours(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // Already set (tests build several apps in one process): keep the first.
    let _ = result;
}

/// Colour codes only for a person at a terminal who has not asked for none.
fn colours(is_terminal: bool, no_color: bool) -> bool {
    is_terminal && !no_color
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn colours_only_at_a_terminal_that_wants_them() {
        assert!(colours(true, false));
        assert!(!colours(false, false), "a file or a pipe gets no escape codes");
        assert!(!colours(true, true), "NO_COLOR");
    }

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
    fn act(name: &str) -> Result<(), String> {
        Err(format!("no agent {name:?}"))
    }

    #[test]
    fn user_text_in_a_field_cannot_forge_a_line_or_colour_the_terminal_and_client_errors_are_not_errors() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let _ = act("fox\n2026-01-01T00:00:00Z ERROR forged \x1b[31mred");
        });
        let out = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(!out.contains('\x1b'), "{out:?}");
        assert!(out.contains(r"agent=") && out.contains(r"fox\n2026"), "{out}");
        assert!(out.contains("DEBUG") && !out.contains(" ERROR act"), "{out}");
    }
}
