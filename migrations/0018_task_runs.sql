-- Standalone task runs (Fetch's model) and board skill runs (Genie's): one agent working on one
-- task, iteration after iteration. The run is recorded (`pending`) before anything acts on it;
-- the conductor claims it, starts its agent and makes it `running` in one transaction, so a run
-- never gets two agents. At most one live run per task.
CREATE TABLE task_runs (
    id             uuid PRIMARY KEY,
    task_id        uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    -- `task`: do the task (dispatch); `skill`: do a board column's action_skill on it.
    kind           text NOT NULL CHECK (kind IN ('task', 'skill')),
    -- For a skill run: the column whose skill it does (the card moves on from it when done).
    column_id      uuid REFERENCES board_columns (id) ON DELETE SET NULL,
    skill          text,
    provider       text NOT NULL CHECK (length(provider) BETWEEN 1 AND 100),
    agent_id       uuid REFERENCES agents (id) ON DELETE SET NULL,
    agent_name     text,
    branch         text,
    -- The iteration under way (1-based) and the most there may be.
    iteration      integer NOT NULL DEFAULT 1 CHECK (iteration >= 1),
    max_iterations integer NOT NULL CHECK (max_iterations >= 1),
    -- The message that began the current iteration (the brief, a continuation, an answer): the
    -- iteration is over when the agent stops after it was delivered.
    prompt_id      uuid REFERENCES messages (id) ON DELETE SET NULL,
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
    outcome        text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CHECK ((kind = 'skill') = (skill IS NOT NULL))
);
CREATE INDEX task_runs_task ON task_runs (task_id, created_at);
CREATE UNIQUE INDEX task_runs_live ON task_runs (task_id) WHERE status IN ('pending', 'running');
CREATE INDEX task_runs_agent ON task_runs (agent_id) WHERE status = 'running';
CREATE INDEX task_runs_due ON task_runs (created_at) WHERE status IN ('pending', 'running');

-- Built-in board templates, there on a fresh install (a template of the same name made by a
-- person before is left alone).
INSERT INTO board_templates (id, name, description, columns) VALUES
    ('5e0f7a1c-0000-4000-8000-000000000001', 'software',
     'Backlog to done: an agent reviews, a person approves',
     '[{"name": "Backlog", "gate": "auto", "action_skill": null, "wip_limit": null},
       {"name": "Plan", "gate": "auto", "action_skill": null, "wip_limit": null},
       {"name": "Build", "gate": "auto", "action_skill": null, "wip_limit": null},
       {"name": "Review", "gate": "agent", "action_skill": "review", "wip_limit": null},
       {"name": "Approve", "gate": "human", "action_skill": null, "wip_limit": null},
       {"name": "Done", "gate": "auto", "action_skill": null, "wip_limit": null}]'),
    ('5e0f7a1c-0000-4000-8000-000000000002', 'simple',
     'To do, doing, done',
     '[{"name": "To do", "gate": "auto", "action_skill": null, "wip_limit": null},
       {"name": "Doing", "gate": "auto", "action_skill": null, "wip_limit": null},
       {"name": "Done", "gate": "auto", "action_skill": null, "wip_limit": null}]')
ON CONFLICT (name) DO NOTHING;
