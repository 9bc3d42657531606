-- Idempotency keys: a client whose creating POST was cut (a crash, a dropped connection) cannot
-- know whether it committed; it retries with the same `Idempotency-Key` and gets the first
-- response instead of a duplicate. The key is recorded in the transaction that creates the
-- thing, so the two commit together or not at all. Keys are per caller (the token's id), so two
-- clients' keys never collide, and live 24 hours: older rows are ignored and deleted as new ones
-- are recorded.

CREATE TABLE idempotency_keys (
    caller       text NOT NULL,
    key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    route        text NOT NULL,
    request_hash bytea NOT NULL,
    status       smallint NOT NULL CHECK (status BETWEEN 100 AND 599),
    response     jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (caller, key)
);

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
