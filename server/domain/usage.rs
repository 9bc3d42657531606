//! Token use from a Claude Code transcript: its JSONL has a line per content block, and each
//! assistant line carries its message's `usage` (input, output, cache creation and cache read
//! tokens). A message's blocks repeat the same usage, so a message counts once: by its id, and
//! the lines of one message come together. Read in chunks: only whole lines count, and the
//! caller keeps the byte offset and the last message id between chunks.

use serde::{Deserialize, Serialize};

/// Tokens an agent used, summed over its transcript.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"input_tokens": 1200, "output_tokens": 3400, "cache_creation_input_tokens": 15000,
    "cache_read_input_tokens": 250000}))]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_creation_input_tokens: i64,
    pub cache_read_input_tokens: i64,
}

impl Usage {
    pub fn total(&self) -> i64 {
        self.input_tokens + self.output_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    fn add(&mut self, other: &MessageUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
    }
}

/// What reading a chunk found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub usage: Usage,
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
    usage: Option<MessageUsage>,
}

#[derive(Deserialize, Default)]
struct MessageUsage {
    #[serde(default)]
    input_tokens: i64,
    #[serde(default)]
    output_tokens: i64,
    #[serde(default)]
    cache_creation_input_tokens: i64,
    #[serde(default)]
    cache_read_input_tokens: i64,
}

/// Sums the usage of the whole lines of `chunk`; `last_message` is the id counted last before it.
/// Lines that are not JSON, not an assistant's, or carry no usage are skipped.
pub fn read_chunk(chunk: &[u8], last_message: Option<String>) -> Chunk {
    let consumed = chunk.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut read = Chunk { usage: Usage::default(), consumed, last_message };
    for line in chunk[..consumed].split(|b| *b == b'\n') {
        let Ok(line) = serde_json::from_slice::<Line>(line) else { continue };
        let Some(Message { id, usage: Some(usage) }) =
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
        read.usage.add(&usage);
        read.last_message = id;
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRANSCRIPT: &str = include_str!("../../tests/fixtures/transcripts/claude-2.1.jsonl");

    #[test]
    fn a_transcript_counts_each_message_once_and_skips_everything_else() {
        let read = read_chunk(TRANSCRIPT.as_bytes(), None);
        assert_eq!(read.consumed, TRANSCRIPT.len());
        assert_eq!(
            read.usage,
            Usage {
                input_tokens: 9,
                output_tokens: 302,
                cache_creation_input_tokens: 14087,
                cache_read_input_tokens: 28470
            }
        );
        assert_eq!(read.last_message.as_deref(), Some("msg_01XK3"));
    }

    #[test]
    fn chunks_count_only_whole_lines_and_carry_the_last_message_across() {
        let whole = read_chunk(TRANSCRIPT.as_bytes(), None).usage;
        for cut in [1, 100, TRANSCRIPT.len() / 2, TRANSCRIPT.len() - 1] {
            let first = read_chunk(&TRANSCRIPT.as_bytes()[..cut], None);
            let second = read_chunk(&TRANSCRIPT.as_bytes()[first.consumed..], first.last_message.clone());
            let mut sum = first.usage;
            sum.input_tokens += second.usage.input_tokens;
            sum.output_tokens += second.usage.output_tokens;
            sum.cache_creation_input_tokens += second.usage.cache_creation_input_tokens;
            sum.cache_read_input_tokens += second.usage.cache_read_input_tokens;
            assert_eq!(sum, whole, "cut at {cut}");
        }
        assert_eq!(read_chunk(b"{\"type\":\"assistant\"", None), Chunk::default(), "half a line waits");
    }
}
