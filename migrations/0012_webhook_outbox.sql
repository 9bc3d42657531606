-- The webhook outbox is filled by the database, in the statement that records the events: any
-- `INSERT INTO events` (one event or a batch, from any module) writes, for each event that an
-- enabled subscription of its project wants, one `webhook_outbox` row naming those
-- subscriptions. Senders turn outbox rows into one `webhook_deliveries` row per subscription (in
-- the transaction that claims them), so a write pays one small row whatever the number of
-- subscriptions, and nothing when none wants its events. Before, the application read the
-- candidate subscriptions back, inserted a delivery per subscription with a second statement and
-- woke the senders with a NOTIFY inside the writer's transaction: a round trip, ten rows with
-- three indexes each, and a commit-serialising lock on every write once ten subscriptions
-- existed. Senders now learn of new outbox rows from the events wake-up that follows every
-- commit (server/webhooks/sender.rs).

CREATE TABLE webhook_outbox (
    event_id      bigint PRIMARY KEY,
    subscriptions uuid[] NOT NULL
);

-- Whether a subscription's `events` entries want an event: the one place this rule lives (the
-- live stream's filter uses it too). Entries are validated by the API (domain::webhook) before
-- they are stored: event types, `prefix.*` patterns, `*`, and multiclaude's hook names.
-- One expression and no subquery, so PostgreSQL inlines it into the statements that use it (a
-- subquery made it a function call per subscription and event, ~30 µs each). A `prefix.*`
-- pattern names one segment, so it matches when it equals the event type's first segment + `.*`.
CREATE FUNCTION webhook_wants(entries text[], event_type text, payload jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT entries && ARRAY['*', 'on_event', event_type, split_part(event_type, '.', 1) || '.*']
        OR (event_type = 'agent.spawned' AND 'on_agent_started' = ANY (entries))
        OR (event_type = 'agent.state_changed' AND payload -> 'to' = '"idle"' AND 'on_agent_idle' = ANY (entries))
        OR (event_type = 'agent.stopped' AND 'on_agent_stopped' = ANY (entries))
        OR (event_type = 'agent.stuck' AND 'on_worker_stuck' = ANY (entries))
        OR (event_type = 'message.delivered' AND 'on_message_sent' = ANY (entries))
        OR (event_type IN ('merge.completed', 'wish.merged') AND 'on_merge_complete' = ANY (entries))
        OR (event_type = 'pr.created' AND 'on_pr_created' = ANY (entries))
        OR (event_type = 'ci.failed' AND 'on_ci_failed' = ANY (entries))
        OR ((event_type = 'task.assigned' OR (event_type = 'task.started' AND payload -> 'assignee' <> 'null'))
            AND 'on_task_assigned' = ANY (entries))
$$;

-- One statement-level trigger per `INSERT INTO events`: a batch of events costs one join with
-- the (few) enabled subscriptions. `project` is already filled by the row trigger
-- `events_fill_project`.
CREATE FUNCTION events_queue_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (event_id, subscriptions)
    SELECT e.id, array_agg(s.id ORDER BY s.id)
    FROM new_events e
    JOIN webhook_subscriptions s ON s.enabled AND (s.project IS NULL OR s.project = e.project)
    WHERE webhook_wants(s.events, e.type, e.payload)
    GROUP BY e.id;
    RETURN NULL;
END $$;
CREATE TRIGGER events_queue_deliveries AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION events_queue_deliveries();

-- Each delivery row's foreign keys cost two constraint checks, and the check on the subscription
-- locks that row (FOR KEY SHARE), so concurrent senders made multixacts of the same few rows.
-- Events are never deleted (the log is append-only), so `event_id` needs no check nor the index
-- that served only its cascade. A subscription's deliveries are deleted with it by
-- `db::webhooks::delete`; outbox rows naming it make no delivery once it is gone, and a delivery
-- made by a transaction that overlapped the deletion is left without its subscription, which
-- every reader (claim, due checks, the delivery log) joins: it is never sent nor shown.
ALTER TABLE webhook_deliveries
    DROP CONSTRAINT webhook_deliveries_subscription_id_fkey,
    DROP CONSTRAINT webhook_deliveries_event_id_fkey;
DROP INDEX webhook_deliveries_event;
