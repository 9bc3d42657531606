-- Events out to the world: the project an event belongs to (for filters), the NOTIFY that wakes
-- live streams on every replica, outgoing webhook subscriptions and their delivery outbox.

-- The project (slug) an event is about, so streams and subscriptions can filter by project
-- without every caller of `record` passing it: `payload.project` when the payload carries it,
-- else derived from the subject (`project:<slug>`, `task:<uuid>`, `wish:<slug>`, `board:<uuid>`).
ALTER TABLE events ADD COLUMN project text;
CREATE INDEX events_project ON events (project, tx, id) WHERE project IS NOT NULL;

CREATE FUNCTION events_fill_project() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind text := split_part(NEW.subject, ':', 1);
    ident text := substr(NEW.subject, length(kind) + 2);
BEGIN
    IF NEW.project IS NULL THEN
        NEW.project := NEW.payload ->> 'project';
    END IF;
    IF NEW.project IS NULL THEN
        IF kind = 'project' THEN
            NEW.project := ident;
        ELSIF kind = 'task' AND ident ~ '^[0-9a-f-]{36}$' THEN
            SELECT p.slug INTO NEW.project FROM tasks t JOIN projects p ON p.id = t.project_id
             WHERE t.id = ident::uuid;
        ELSIF kind = 'wish' THEN
            SELECT p.slug INTO NEW.project FROM wishes w JOIN projects p ON p.id = w.project_id
             WHERE w.slug = ident;
        ELSIF kind = 'board' AND ident ~ '^[0-9a-f-]{36}$' THEN
            SELECT p.slug INTO NEW.project FROM boards b JOIN projects p ON p.id = b.project_id
             WHERE b.id = ident::uuid;
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER events_fill_project BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_fill_project();

-- The wake-up for live streams and delivery loops on every replica. Sent at commit; identical
-- payloads in one transaction fold into one notification. The table stays the truth: a lost
-- notification only delays a reader until its next poll.
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchyard_events', '');
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();

-- Where to send events. `events` holds what the user asked for: event types, `prefix.*`
-- patterns and multiclaude hook names. `secret` signs deliveries (Standard Webhooks `whsec_…`);
-- after a rotation `previous_secret` also signs until `previous_secret_expires_at`.
CREATE TABLE webhook_subscriptions (
    id                        uuid PRIMARY KEY,
    url                       text NOT NULL CHECK (url ~ '^https?://'),
    events                    text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 100),
    project                   text CHECK (project IS NULL OR project ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    description               text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    secret                    text NOT NULL,
    previous_secret           text,
    previous_secret_expires_at timestamptz,
    enabled                   boolean NOT NULL DEFAULT true,
    disabled_reason           text,
    -- Since when every delivery has failed; cleared by a success. Too old: disabled.
    failing_since             timestamptz,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_subscriptions_enabled ON webhook_subscriptions (project) WHERE enabled;

-- The outbox: one row per (event, subscription), written in the event's transaction. A sender
-- claims due rows with FOR UPDATE SKIP LOCKED and holds a lease (`leased_until`) while sending;
-- a sender that dies leaves its lease to expire and another sender retries the row.
-- `message_id` is the `webhook-id` header: stable across retries and redeliveries.
CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    subscription_id  uuid NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id         bigint REFERENCES events (id) ON DELETE CASCADE,
    message_id       text NOT NULL,
    event_type       text NOT NULL,
    -- Only for deliveries with no event row (test events); others send their event.
    body             jsonb,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    leased_until     timestamptz,
    last_status_code integer,
    last_error       text,
    last_duration_ms integer,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (event_id IS NOT NULL OR body IS NOT NULL)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, created_at, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id) WHERE event_id IS NOT NULL;
