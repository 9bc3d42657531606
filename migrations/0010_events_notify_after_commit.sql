-- Live streams and delivery loops are woken after commit now, by each process's notifier
-- (server/feed.rs), not by a NOTIFY inside every event-writing transaction: PostgreSQL
-- serialises all committing transactions that have notifications pending, so the trigger made
-- every such commit in the system wait for the others. `events_fill_project` stays.
DROP TRIGGER events_notify ON events;
DROP FUNCTION events_notify();
