-- An event about an agent or a team belongs to the agent's or team's project, as an event about a
-- task, wish or board already does: before, `agent.*` and `team.*` events had `project` NULL, so a
-- project-scoped webhook never got `on_agent_idle`, `on_agent_started`, `on_agent_stopped` or
-- `on_worker_stuck`, and the event log could not be filtered to a project's agents.
CREATE OR REPLACE FUNCTION events_fill_project() RETURNS trigger LANGUAGE plpgsql AS $$
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
        ELSIF kind = 'agent' THEN
            SELECT p.slug INTO NEW.project FROM agents a JOIN projects p ON p.id = a.project_id
             WHERE a.name = ident;
        ELSIF kind = 'team' THEN
            SELECT p.slug INTO NEW.project FROM teams t JOIN projects p ON p.id = t.project_id
             WHERE t.name = ident;
        END IF;
    END IF;
    RETURN NEW;
END $$;

-- What a subscription's deliveries look like: `standard` (the event as JSON, Standard Webhooks),
-- or a ready-made body for a chat or push service that takes a plain POST: `slack` (an incoming
-- webhook's `{"text": …}`) or `ntfy` (a text body with `Title` and `Click` headers), each with a
-- link back to the dashboard page that answers it. Every format is signed the same way.
ALTER TABLE webhook_subscriptions
    ADD COLUMN format text NOT NULL DEFAULT 'standard' CHECK (format IN ('standard', 'slack', 'ntfy'));
