-- API tokens: only the SHA-256 of the secret is kept.
CREATE TABLE tokens (
    id           uuid PRIMARY KEY,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    scope        text NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    hash         text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
-- A name identifies a live token; a revoked one frees its name.
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;

-- The event log: append-only, written in the same transaction as the change it records.
-- No updated_at: an event is never updated.
-- `tx` is the writing transaction's id. Readers follow the log in (tx, id) order and only up to
-- the oldest transaction still running, so an event committed late is never skipped by a cursor.
CREATE TABLE events (
    id         bigserial PRIMARY KEY,
    tx         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    type       text NOT NULL CHECK (type ~ '^[a-z][a-z0-9_.]*$'),
    subject    text NOT NULL,
    payload    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_order ON events (tx, id);
