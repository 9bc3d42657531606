-- Token use per agent, read from its Claude Code transcript (JSONL; the hooks carry its path)
-- incrementally: the byte offset read up to, and the last message counted (Claude Code writes one
-- line per content block, each repeating its message's usage, so a message counts once).
CREATE TABLE agent_usage (
    agent_id                    uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    transcript_path             text NOT NULL,
    read_offset                 bigint NOT NULL DEFAULT 0 CHECK (read_offset >= 0),
    last_message                text,
    input_tokens                bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens               bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_creation_input_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_creation_input_tokens >= 0),
    cache_read_input_tokens     bigint NOT NULL DEFAULT 0 CHECK (cache_read_input_tokens >= 0),
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);
