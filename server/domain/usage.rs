//! Token use from a Claude Code transcript: its JSONL has a line per content block, and each
//! assistant line carries its message's `usage` (input, output, cache creation and cache read
//! tokens). A message's blocks repeat the same usage, so a message counts once: by its id, and
//! the lines of one message come together. Read in chunks: only whole lines count, and the
//! caller keeps the byte offset and the last message id between chunks. Sums are kept per model
//! (`message.model`), since each model has its own price. Codex's and Gemini CLI's session logs
//! are read the same way, in chunks, by [`codex`] and [`gemini`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod codex;
pub mod gemini;

/// The model of a message that names none.
pub const UNKNOWN_MODEL: &str = "unknown";
/// The longest model name kept (as the `agent_model_usage.model` check says).
const MODEL_MAX: usize = 100;

/// Tokens an agent used, summed over its transcript.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
#[schema(example = json!({"input_tokens": 1200, "output_tokens": 3400, "cache_creation_input_tokens": 15000,
    "cache_read_input_tokens": 250000}))]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_creation_input_tokens: i64,
    pub cache_read_input_tokens: i64,
}

impl Usage {
    /// Input, output and cache-read tokens, none written to the cache: how the CLIs' session
    /// logs read in tests.
    #[cfg(test)]
    pub(crate) fn read(input: i64, output: i64, cache_read: i64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cache_read,
        }
    }

    pub fn total(&self) -> i64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_creation_input_tokens =
            self.cache_creation_input_tokens.saturating_add(other.cache_creation_input_tokens);
        self.cache_read_input_tokens = self.cache_read_input_tokens.saturating_add(other.cache_read_input_tokens);
    }
}

/// What reading a chunk found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Tokens per model.
    pub usage: BTreeMap<String, Usage>,
    /// Bytes of the chunk read: its whole lines (a line still being written waits).
    pub consumed: usize,
    /// The last message counted, for the next chunk.
    pub last_message: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
}

/// Sums the usage of the whole lines of `chunk`; `last_message` is the id counted last before it.
/// Lines that are not JSON, not an assistant's, or carry no usage (or none at all: Claude Code's
/// `<synthetic>` messages) are skipped.
pub fn read_chunk(chunk: &[u8], last_message: Option<String>) -> Chunk {
    let consumed = chunk.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut read = Chunk { usage: BTreeMap::new(), consumed, last_message };
    for line in chunk[..consumed].split(|b| *b == b'\n') {
        let Ok(line) = serde_json::from_slice::<Line>(line) else { continue };
        let Some(Message { id, model, usage: Some(usage) }) =
            line.message.filter(|_| line.kind.as_deref() == Some("assistant"))
        else {
            continue;
        };
        if id.is_some() && id == read.last_message {
            continue;
        }
        // Negative counts are no one's: a hostile transcript cannot lower the sums.
        if [usage.input_tokens, usage.output_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens]
            .iter()
            .any(|n| *n < 0)
        {
            continue;
        }
        read.last_message = id;
        if usage.total() == 0 {
            continue;
        }
        read.usage.entry(model_name(model)).or_default().add(&usage);
    }
    read
}

/// The model's name as a log gives it: the log's word too, so a name of sensible length, or
/// [`UNKNOWN_MODEL`].
fn model_name(model: Option<String>) -> String {
    model.filter(|m| !m.is_empty() && m.len() <= MODEL_MAX).unwrap_or_else(|| UNKNOWN_MODEL.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// A real transcript (see `tests/fixtures/transcripts/README.md`).
    const TRANSCRIPT: &str = include_str!("../../tests/fixtures/transcripts/claude-2.1.14.jsonl");

    /// The sums per model computed apart from the reader: every assistant line's usage, each
    /// message id once wherever its lines are.
    fn expected(transcript: &str) -> BTreeMap<String, Usage> {
        let mut seen = HashSet::new();
        let mut sums = BTreeMap::<String, Usage>::new();
        for line in transcript.lines() {
            let line: serde_json::Value = serde_json::from_str(line).expect("JSON");
            let message = &line["message"];
            if line["type"] != "assistant" || !seen.insert(message["id"].as_str().expect("id").to_owned()) {
                continue;
            }
            let sum = sums.entry(message["model"].as_str().expect("model").to_owned()).or_default();
            let tokens = |kind: &str| message["usage"][kind].as_i64().expect("count");
            sum.input_tokens += tokens("input_tokens");
            sum.output_tokens += tokens("output_tokens");
            sum.cache_creation_input_tokens += tokens("cache_creation_input_tokens");
            sum.cache_read_input_tokens += tokens("cache_read_input_tokens");
        }
        sums
    }

    #[test]
    fn a_recorded_transcript_counts_each_message_once_per_model() {
        let read = read_chunk(TRANSCRIPT.as_bytes(), None);
        assert_eq!(read.consumed, TRANSCRIPT.len());
        let expected = expected(TRANSCRIPT);
        assert_eq!(expected.len(), 1, "one model in this recording");
        assert_eq!(read.usage, expected);
        let opus = read.usage["claude-opus-4-5-20251101"];
        assert_eq!(opus.cache_creation_input_tokens, 7610, "as summed by hand (Python), each message once");
        assert_eq!(read.last_message.as_deref(), Some("msg_01QxZNZGWkMhhPM5orgjdXSi"));
    }

    #[test]
    fn chunks_count_only_whole_lines_and_carry_the_last_message_across() {
        let whole = read_chunk(TRANSCRIPT.as_bytes(), None).usage;
        for cut in [1, 100, TRANSCRIPT.len() / 3, TRANSCRIPT.len() / 2, TRANSCRIPT.len() - 1] {
            let first = read_chunk(&TRANSCRIPT.as_bytes()[..cut], None);
            let second = read_chunk(&TRANSCRIPT.as_bytes()[first.consumed..], first.last_message.clone());
            let mut sum = first.usage;
            for (model, usage) in &second.usage {
                sum.entry(model.clone()).or_default().add(usage);
            }
            assert_eq!(sum, whole, "cut at {cut}");
        }
        assert_eq!(read_chunk(b"{\"type\":\"assistant\"", None), Chunk::default(), "half a line waits");
    }

    #[test]
    fn models_are_summed_apart_and_empty_or_hostile_usage_adds_nothing() {
        let line = |id: &str, model: &str, output: i64| {
            format!(
                "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"{model}\",\"usage\":{{\"input_tokens\":1,\"output_tokens\":{output}}}}}}}\n"
            )
        };
        let text = line("a", "claude-opus-4-5", 10)
            + &line("b", "claude-haiku-4-5", 3)
            + &line("c", "claude-opus-4-5", 5)
            + &line("d", "claude-opus-4-5", -7)
            + "{\"type\":\"assistant\",\"message\":{\"id\":\"e\",\"model\":\"<synthetic>\",\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}}\n"
            + "{\"type\":\"assistant\",\"message\":{\"id\":\"f\",\"usage\":{\"output_tokens\":2}}}\n";
        let read = read_chunk(text.as_bytes(), None);
        let outputs: Vec<_> = read.usage.iter().map(|(m, u)| (m.as_str(), u.output_tokens, u.input_tokens)).collect();
        assert_eq!(outputs, [("claude-haiku-4-5", 3, 1), ("claude-opus-4-5", 15, 2), (UNKNOWN_MODEL, 2, 0)]);
    }
}
