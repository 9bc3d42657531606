-- The merge queue (v0's entries: pending → processing → completed | failed | conflict), a
-- project's merge settings, and multiclaude's task history.

-- How a project's merge queue merges: the gate command, the fix cap, what a conflict does and
-- whether merged branches are kept. A project without a row has the defaults.
CREATE TABLE merge_settings (
    project_id        uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    -- Run in a scratch clone of the merge commit (`sh -c`); NULL: no gate.
    merge_check       text CHECK (merge_check IS NULL OR length(merge_check) BETWEEN 1 AND 4000),
    gate_timeout_secs integer NOT NULL DEFAULT 1800 CHECK (gate_timeout_secs BETWEEN 1 AND 86400),
    -- Fix agents per entry before a person is asked.
    fix_cap           integer NOT NULL DEFAULT 2 CHECK (fix_cap BETWEEN 0 AND 20),
    -- 'agent': a conflict gets a fix agent (up to the cap); 'human': straight to a person.
    on_conflict       text NOT NULL DEFAULT 'agent' CHECK (on_conflict IN ('agent', 'human')),
    keep_branches     boolean NOT NULL DEFAULT false,
    version           integer NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One entry per wish, reused when it re-enters the queue after a fix or a retry.
CREATE SEQUENCE merge_queue_position;
CREATE TABLE merge_queue (
    id             uuid PRIMARY KEY,
    wish_id        uuid NOT NULL UNIQUE REFERENCES wishes (id) ON DELETE CASCADE,
    project_id     uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    target_branch  text NOT NULL,
    wish_branch    text NOT NULL,
    -- Order in its queue; a retried or fixed entry keeps its place.
    position       bigint NOT NULL DEFAULT nextval('merge_queue_position'),
    state          text NOT NULL DEFAULT 'pending'
                       CHECK (state IN ('pending', 'processing', 'completed', 'failed', 'conflict')),
    -- Held by a person: not processed until released.
    held           boolean NOT NULL DEFAULT false,
    -- Predicted to conflict with this entry ahead of it: waits until that one leaves the queue.
    held_for       text,
    prediction     jsonb,
    -- Processing: who claimed it, in which process (the node's start time), until when.
    claimed_by     text,
    claimed_run    timestamptz,
    lease_until    timestamptz,
    -- The commits of the attempt: the target it was made on, the wish commit merged, and the
    -- merge commit once the gate passed (recorded before the target branch moves).
    base_commit    text,
    wish_commit    text,
    merge_commit   text,
    gate_log       text,
    conflict_files text[] NOT NULL DEFAULT '{}',
    failure_reason text,
    attempts       integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    fix_attempts   integer NOT NULL DEFAULT 0 CHECK (fix_attempts >= 0),
    -- 'human' once the fix cap is reached (or the project says conflicts go to a person).
    assignee       text,
    fix_agent      text,
    started_at     timestamptz,
    finished_at    timestamptz,
    version        integer NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'processing') = (claimed_by IS NOT NULL))
);
CREATE INDEX merge_queue_order ON merge_queue (project_id, target_branch, position);
CREATE INDEX merge_queue_open ON merge_queue (state, position) WHERE state IN ('pending', 'processing');
-- One entry at a time per project and target branch, whichever node claims it.
CREATE UNIQUE INDEX merge_queue_one_processing ON merge_queue (project_id, target_branch)
    WHERE state = 'processing';

-- multiclaude's TaskHistoryEntry: one row per finished worker agent, kept after the agent is
-- deleted.
CREATE TABLE task_history (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id     uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    agent_id       uuid UNIQUE REFERENCES agents (id) ON DELETE SET NULL,
    wish_id        uuid REFERENCES wishes (id) ON DELETE SET NULL,
    name           text NOT NULL,
    task           text,
    branch         text,
    pr_url         text,
    pr_number      integer,
    status         text NOT NULL CHECK (status IN ('open', 'merged', 'closed', 'no-pr', 'failed', 'unknown')),
    summary        text,
    failure_reason text,
    created_at     timestamptz NOT NULL,
    completed_at   timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_history_project ON task_history (project_id, completed_at DESC, id);
CREATE INDEX task_history_order ON task_history (completed_at DESC, id);
CREATE INDEX task_history_wish ON task_history (wish_id) WHERE wish_id IS NOT NULL;

-- A worker agent that finishes (`done` or `error`) gets its history row in the transaction that
-- finished it, whichever code path that was: the row cannot be forgotten by a new one.
CREATE FUNCTION task_history_on_finish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_history (project_id, agent_id, wish_id, name, task, branch, status, summary,
                              failure_reason, created_at, completed_at)
    VALUES (NEW.project_id, NEW.id, NEW.wish_id, NEW.name, NEW.task, NEW.branch,
            CASE WHEN NEW.state = 'error' THEN 'failed' ELSE 'no-pr' END,
            NEW.summary, NEW.failure_reason, NEW.created_at, now())
    ON CONFLICT (agent_id) DO UPDATE SET
        status = EXCLUDED.status, summary = EXCLUDED.summary, failure_reason = EXCLUDED.failure_reason,
        completed_at = EXCLUDED.completed_at, updated_at = now()
    WHERE task_history.status NOT IN ('merged', 'closed');
    RETURN NEW;
END $$;
CREATE TRIGGER agents_finished AFTER UPDATE OF state ON agents
    FOR EACH ROW WHEN (NEW.kind = 'worker' AND NEW.state IN ('done', 'error') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION task_history_on_finish();
