//! Token use from a Codex session log (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`,
//! Codex 0.169): a line per record, `{"type": …, "payload": …}`, appended. A `turn_context`
//! names the turn's `model`; an `event_msg` whose payload is a `token_count` carries
//! `info.total_token_usage`, the session's running sums (`input_tokens`, `cached_input_tokens`,
//! `cache_write_input_tokens`, `output_tokens`, `reasoning_output_tokens`), and
//! `info.last_token_usage`, the last request's. (Requests outside the conversation, such as the
//! thread's title, are in no line: they are not counted.)
//! Codex sends a `token_count` again when only its rate limits changed (the same sums), so what
//! counts is how much the running sums grew since the last one; sums that went down (a session
//! started over) count the last request's usage. The model and the last sums are carried
//! between chunks.
//!
//! Mapped as OpenAI bills: `input_tokens` includes the cached ones (and the ones written to a
//! cache), so input is what is left of it, cache reads are `cached_input_tokens` and cache
//! writes `cache_write_input_tokens`; `output_tokens` includes the reasoning ones.

use serde::{Deserialize, Serialize};

use super::{model_name, Chunk, Usage};

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    payload: Option<Payload>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: Option<String>,
    /// A `turn_context`'s.
    model: Option<String>,
    /// A `token_count`'s.
    info: Option<Info>,
}

#[derive(Deserialize)]
struct Info {
    total_token_usage: Option<Tokens>,
    last_token_usage: Option<Tokens>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
struct Tokens {
    input_tokens: i64,
    cached_input_tokens: i64,
    cache_write_input_tokens: i64,
    output_tokens: i64,
}

impl Tokens {
    fn fields(&self) -> [i64; 4] {
        [self.input_tokens, self.cached_input_tokens, self.cache_write_input_tokens, self.output_tokens]
    }

    fn minus(&self, earlier: &Tokens) -> Tokens {
        Tokens {
            input_tokens: self.input_tokens - earlier.input_tokens,
            cached_input_tokens: self.cached_input_tokens - earlier.cached_input_tokens,
            cache_write_input_tokens: self.cache_write_input_tokens - earlier.cache_write_input_tokens,
            output_tokens: self.output_tokens - earlier.output_tokens,
        }
    }

    fn usage(&self) -> Usage {
        let cached = self.cached_input_tokens.min(self.input_tokens);
        let written = self.cache_write_input_tokens.min(self.input_tokens - cached);
        Usage {
            input_tokens: self.input_tokens - cached - written,
            output_tokens: self.output_tokens,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: cached,
        }
    }
}

/// What is carried from one chunk to the next (`agent_usage.last_message`, as JSON).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Carried {
    model: Option<String>,
    total: Tokens,
}

/// Sums the usage of the whole lines of `chunk`; `carried` is what the last chunk left.
pub fn read_chunk(chunk: &[u8], carried: Option<String>) -> Chunk {
    let consumed = chunk.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut state: Carried = carried.and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default();
    let mut read = Chunk { consumed, ..Chunk::default() };
    for line in chunk[..consumed].split(|b| *b == b'\n') {
        let Ok(Line { kind: Some(kind), payload: Some(payload) }) = serde_json::from_slice::<Line>(line) else {
            continue;
        };
        match (kind.as_str(), payload.kind.as_deref()) {
            ("turn_context", _) => {
                if let Some(model) = payload.model {
                    state.model = Some(model);
                }
            }
            ("event_msg", Some("token_count")) => {
                let Some(Info { total_token_usage: Some(total), last_token_usage }) = payload.info else { continue };
                // Negative counts are no one's: a hostile log cannot lower the sums.
                if total.fields().iter().any(|n| *n < 0) {
                    continue;
                }
                let grown = total.minus(&state.total);
                let added = if grown.fields().iter().all(|n| *n >= 0) {
                    grown
                } else {
                    last_token_usage.filter(|l| l.fields().iter().all(|n| *n >= 0)).unwrap_or_default()
                };
                state.total = total;
                let usage = added.usage();
                if usage.total() > 0 {
                    read.usage.entry(model_name(state.model.clone())).or_default().add(&usage);
                }
            }
            _ => {}
        }
    }
    read.last_message = serde_json::to_string(&state).ok();
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::usage::UNKNOWN_MODEL;

    /// Lines of a real Codex 0.169 session log (the `turn_context` cut to its fields that
    /// matter here), from an agent answering one message of the scripted model.
    const TURN: &str = concat!(
        r#"{"timestamp":"2026-11-28T19:50:32.486Z","ordinal":1,"type":"event_msg","payload":{"type":"task_started","turn_id":"01a223b5-950d-7411-9ce4-b30d90a4ba16","started_at":1795895432,"model_context_window":258400,"collaboration_mode_kind":"default"}}"#,
        "\n",
        r#"{"timestamp":"2026-11-28T19:50:32.528Z","ordinal":9,"type":"turn_context","payload":{"turn_id":"01a223b5-950d-7411-9ce4-b30d90a4ba16","cwd":"/tmp/.tmpy7jG4I/clones/owl","approval_policy":"never","model":"gpt-6.1-sol","comp_hash":"3000"}}"#,
        "\n",
        r#"{"timestamp":"2026-11-28T19:50:32.554Z","ordinal":15,"type":"token_usage_record","payload":{"thread_id":"01a223b5-94da-72f1-a5cb-705558cc61fa","turn_id":"01a223b5-950d-7411-9ce4-b30d90a4ba16","response_id":"resp_65b28d1c3f3f4841ab050a55d48d4fb9","usage":{"input_tokens":1014,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":21,"reasoning_output_tokens":0,"total_tokens":1035}}}"#,
        "\n",
        r#"{"timestamp":"2026-11-28T19:50:32.555Z","ordinal":16,"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1014,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":21,"reasoning_output_tokens":0,"total_tokens":1035},"last_token_usage":{"input_tokens":1014,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":21,"reasoning_output_tokens":0,"total_tokens":1035},"last_usage_includes_reasoning":true,"model_context_window":258400},"rate_limits":{"limit_id":"codex","limit_name":null,"primary":null,"secondary":null,"credits":null}}}"#,
        "\n",
        r#"{"timestamp":"2026-11-28T19:50:32.559Z","ordinal":17,"type":"event_msg","payload":{"type":"task_complete","turn_id":"01a223b5-950d-7411-9ce4-b30d90a4ba16","last_agent_message":"Noted.","duration_ms":96}}"#,
        "\n",
    );

    /// A `token_count` line with these running sums (and the last request's).
    fn count(total: [i64; 3], last: [i64; 3]) -> String {
        let usage = |[input, cached, output]: [i64; 3]| {
            format!(
                r#"{{"input_tokens":{input},"cached_input_tokens":{cached},"cache_write_input_tokens":0,"output_tokens":{output},"reasoning_output_tokens":3}}"#
            )
        };
        format!(
            r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{},"last_token_usage":{}}}}}}}"#,
            usage(total),
            usage(last)
        ) + "\n"
    }

    #[test]
    fn a_real_turn_counts_its_token_count_under_the_turns_model() {
        let read = read_chunk(TURN.as_bytes(), None);
        assert_eq!(read.consumed, TURN.len());
        assert_eq!(read.usage.into_iter().collect::<Vec<_>>(), [("gpt-6.1-sol".to_owned(), Usage::read(1014, 21, 0))]);
    }

    #[test]
    fn the_running_sums_count_what_they_grew_across_chunks_and_a_repeat_adds_nothing() {
        let first = read_chunk(TURN.as_bytes(), None);
        // The next turn: the sums grow by the request's, with cached input; then Codex repeats
        // the same sums (its rate limits changed); then half a line still being written.
        let next = count([3014, 1500, 61], [2000, 1500, 40]) + &count([3014, 1500, 61], [2000, 1500, 40]) + "{\"type\"";
        let second = read_chunk(next.as_bytes(), first.last_message.clone());
        assert_eq!(second.consumed, next.len() - "{\"type\"".len(), "half a line waits");
        assert_eq!(
            second.usage["gpt-6.1-sol"],
            Usage::read(500, 40, 1500),
            "the model carried over from the first chunk"
        );
        // A session started over in the same file: its sums went down, its last request counts.
        let restarted = read_chunk(count([100, 0, 5], [100, 0, 5]).as_bytes(), second.last_message);
        assert_eq!(restarted.usage["gpt-6.1-sol"], Usage::read(100, 5, 0));
    }

    #[test]
    fn hostile_or_empty_counts_add_nothing() {
        let text = count([-5, 0, 10], [-5, 0, 10])
            + r#"{"type":"event_msg","payload":{"type":"token_count","info":null}}"#
            + "\n{not json\n"
            + &count([10, 20, 1], [10, 20, 1]);
        let read = read_chunk(text.as_bytes(), None);
        assert_eq!(read.usage[UNKNOWN_MODEL], Usage::read(0, 1, 10), "cached is at most the input; no model named");
        assert_eq!(read.usage.len(), 1);
    }
}
