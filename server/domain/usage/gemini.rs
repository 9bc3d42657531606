//! Token use from a Gemini CLI session log (`.gemini/tmp/<project>/chats/session-*.jsonl`,
//! Gemini CLI 0.61): a line per record, appended. A message is written again whole each time it
//! changes (its tokens arrive, its tool calls are added), under the same `id`; a `gemini`
//! message carries `tokens` (`input`, `output`, `cached`, `thoughts`, `tool`, `total`: the
//! response's `usageMetadata`) and its `model`. Its tokens are set once and never change after
//! (the CLI only fills them in when the message has none), so each id counts once, at its first
//! version with tokens. Other records (`$set`, `$rewindTo`, the header) carry no usage of their
//! own: a `$set` of the whole message list repeats counted tokens and is skipped.
//!
//! Mapped as Gemini CLI's own `/stats` does: `input` includes the `cached` tokens, so input is
//! `input - cached` (plus the tool-use prompt, billed as input), cache reads are `cached`, and
//! output is `output + thoughts` (thinking is billed as output).

use serde::{Deserialize, Serialize};

use super::{model_name, Chunk, Usage};

/// The ids counted last, kept between chunks: a rewritten message is always a recent one.
const RECENT: usize = 16;

#[derive(Deserialize)]
struct Line {
    id: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    model: Option<String>,
    tokens: Option<Tokens>,
}

#[derive(Deserialize)]
#[serde(default)]
#[derive(Default)]
struct Tokens {
    input: i64,
    output: i64,
    cached: i64,
    thoughts: i64,
    tool: i64,
}

/// What is carried from one chunk to the next (`agent_usage.last_message`, as JSON).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Carried {
    counted: Vec<String>,
}

/// Sums the usage of the whole lines of `chunk`; `carried` is what the last chunk left.
pub fn read_chunk(chunk: &[u8], carried: Option<String>) -> Chunk {
    let consumed = chunk.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut state: Carried = carried.and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default();
    let mut read = Chunk { consumed, ..Chunk::default() };
    for line in chunk[..consumed].split(|b| *b == b'\n') {
        let Ok(Line { id: Some(id), kind, model, tokens: Some(t) }) = serde_json::from_slice::<Line>(line) else {
            continue;
        };
        if kind.as_deref() != Some("gemini") || state.counted.contains(&id) {
            continue;
        }
        // Negative counts are no one's: a hostile log cannot lower the sums.
        if [t.input, t.output, t.cached, t.thoughts, t.tool].iter().any(|n| *n < 0) {
            continue;
        }
        state.counted.push(id);
        if state.counted.len() > RECENT {
            state.counted.remove(0);
        }
        let usage = Usage {
            input_tokens: t.input.saturating_sub(t.cached).max(0).saturating_add(t.tool),
            output_tokens: t.output.saturating_add(t.thoughts),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: t.cached.min(t.input),
        };
        if usage.total() > 0 {
            read.usage.entry(model_name(model)).or_default().add(&usage);
        }
    }
    read.last_message = (!state.counted.is_empty()).then(|| serde_json::to_string(&state).unwrap_or_default());
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of a real Gemini CLI 0.61 session log (the first `$set`'s long context cut short),
    /// from an agent answering one message of the scripted model.
    const TURN: &str = concat!(
        r#"{"sessionId":"c2d61d16-00a7-4859-9c70-7f4cbad110a1","projectHash":"9f81963ebf88f770a772da63f201b07bac3279534f4aac58584ae0d44394142b","startTime":"2026-11-28T19:52:50.975Z","lastUpdated":"2026-11-28T19:52:50.975Z","kind":"main"}"#,
        "\n",
        r#"{"$set":{"messages":[{"id":"d04923d38bb0f6017037e74183378ef4","timestamp":"2026-11-28T19:52:50.975Z","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI.</session_context>"}]}]}}"#,
        "\n",
        r#"{"id":"328867fb-e4f0-46ea-8dd9-675ccd57acf8","timestamp":"2026-11-28T19:52:52.590Z","type":"user","content":[{"text":"[message from the operator]\nHow is it going?"}]}"#,
        "\n",
        r#"{"$set":{"lastUpdated":"2026-11-28T19:52:52.590Z"}}"#,
        "\n",
        r#"{"id":"27a6871f-7dc6-4549-8730-41c8f9c12619","timestamp":"2026-11-28T19:52:52.746Z","type":"gemini","content":"Noted.","thoughts":[],"tokens":{"input":1011,"output":21,"cached":0,"thoughts":0,"tool":0,"total":1032},"model":"gemini-3.8-flash"}"#,
        "\n",
        r#"{"$set":{"lastUpdated":"2026-11-28T19:52:52.746Z"}}"#,
        "\n",
    );

    /// A `gemini` message line.
    fn message(id: &str, tokens: &str) -> String {
        format!(r#"{{"id":"{id}","type":"gemini","content":"","tokens":{tokens},"model":"gemini-3.8-flash"}}"#) + "\n"
    }

    #[test]
    fn a_real_turn_counts_the_answer_under_its_model() {
        let read = read_chunk(TURN.as_bytes(), None);
        assert_eq!(read.consumed, TURN.len());
        assert_eq!(
            read.usage.into_iter().collect::<Vec<_>>(),
            [("gemini-3.8-flash".to_owned(), Usage::read(1011, 21, 0))]
        );
    }

    #[test]
    fn a_message_written_again_counts_once_even_across_chunks() {
        let first = read_chunk(TURN.as_bytes(), None);
        // The answer again (its tool calls added), then a new one without tokens yet, then with
        // them, cached input, thoughts and a tool prompt; then that one again in the next chunk.
        let answer = r#"{"input":1011,"output":21,"cached":0,"thoughts":0,"tool":0,"total":1032}"#;
        let full = r#"{"input":3000,"output":50,"cached":2000,"thoughts":7,"tool":3,"total":3060}"#;
        let next = message("27a6871f-7dc6-4549-8730-41c8f9c12619", answer)
            + r#"{"id":"b","type":"gemini","content":"","model":"gemini-3.8-flash"}"#
            + "\n"
            + &message("b", full);
        let second = read_chunk(next.as_bytes(), first.last_message);
        assert_eq!(second.usage["gemini-3.8-flash"], Usage::read(1003, 57, 2000));
        let third = read_chunk(message("b", full).as_bytes(), second.last_message);
        assert!(third.usage.is_empty(), "{:?}", third.usage);
    }

    #[test]
    fn hostile_counts_and_others_messages_add_nothing() {
        let text = message("a", r#"{"input":-5,"output":10}"#)
            + r#"{"id":"u","type":"user","tokens":{"input":5,"output":5}}"#
            + "\n"
            + r#"{"$set":{"messages":[{"id":"c","type":"gemini","tokens":{"input":5,"output":5}}]}}"#
            + "\n";
        assert!(read_chunk(text.as_bytes(), None).usage.is_empty());
    }
}
