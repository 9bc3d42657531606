-- A worker's history row names its work in a line (its group's or task's title, or its step of
-- the wish: "Plan: <the wish's title>") instead of its whole brief, takes its group's reported
-- summary when the agent itself left none, and keeps the agent's role: a planner's or reviewer's
-- row is not marked merged with its wish (nothing of theirs merged).
ALTER TABLE task_history ADD COLUMN role text;

CREATE OR REPLACE FUNCTION task_history_on_finish() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    work text;
    reported text;
BEGIN
    SELECT t.title, t.result INTO work, reported FROM tasks t WHERE t.id = NEW.task_id;
    IF work IS NULL AND NEW.wish_id IS NOT NULL THEN
        SELECT CASE NEW.role WHEN 'planner' THEN 'Plan: ' WHEN 'reviewer' THEN 'Review: '
                             WHEN 'fix' THEN 'Fix: ' ELSE '' END || w.title
          INTO work FROM wishes w WHERE w.id = NEW.wish_id;
    END IF;
    INSERT INTO task_history (project_id, agent_id, wish_id, name, task, branch, status, summary,
                              failure_reason, created_at, completed_at, role)
    VALUES (NEW.project_id, NEW.id, NEW.wish_id, NEW.name,
            COALESCE(work, left(split_part(NEW.task, E'\n', 1), 200)), NEW.branch,
            CASE WHEN NEW.state = 'error' THEN 'failed' ELSE 'no-pr' END,
            COALESCE(NEW.summary, reported), NEW.failure_reason, NEW.created_at, now(), NEW.role)
    ON CONFLICT (agent_id) DO UPDATE SET
        status = EXCLUDED.status, summary = EXCLUDED.summary, failure_reason = EXCLUDED.failure_reason,
        completed_at = EXCLUDED.completed_at, updated_at = now()
    WHERE task_history.status NOT IN ('merged', 'closed');
    RETURN NEW;
END $$;
