-- Token use per agent and model (each model has its own price). `agent_usage` keeps where the
-- transcript was read up to; its sums move here. Sums read before models were told apart have no
-- model: they are kept under `unknown` (no price matches it, so they are shown, never priced).
CREATE TABLE agent_model_usage (
    agent_id                    uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    model                       text NOT NULL CHECK (length(model) BETWEEN 1 AND 100),
    input_tokens                bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens               bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_creation_input_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_creation_input_tokens >= 0),
    cache_read_input_tokens     bigint NOT NULL DEFAULT 0 CHECK (cache_read_input_tokens >= 0),
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, model)
);

INSERT INTO agent_model_usage (agent_id, model, input_tokens, output_tokens, cache_creation_input_tokens,
                               cache_read_input_tokens, created_at, updated_at)
SELECT agent_id, 'unknown', input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens,
       created_at, updated_at
FROM agent_usage
WHERE input_tokens + output_tokens + cache_creation_input_tokens + cache_read_input_tokens > 0;

ALTER TABLE agent_usage
    DROP COLUMN input_tokens,
    DROP COLUMN output_tokens,
    DROP COLUMN cache_creation_input_tokens,
    DROP COLUMN cache_read_input_tokens;
