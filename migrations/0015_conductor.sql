-- The conductor: wishes run themselves (plan, dispatch, integrate, review, hand off to a person).

-- How the conductor runs a project's wishes (domain::project::ConductorConfig); omitted fields
-- take the defaults written here.
ALTER TABLE projects ADD COLUMN conductor_config jsonb NOT NULL
    DEFAULT '{"planning": "agent", "plan_approval": "auto", "review": "agent", "provider": "claude",
              "fallback_providers": [], "max_agents": 4, "keep_clones": false}'
    CHECK (conductor_config->>'planning' IN ('agent', 'human')
       AND conductor_config->>'plan_approval' IN ('auto', 'human')
       AND conductor_config->>'review' IN ('agent', 'human', 'both', 'none'));

-- A planner writes plans; its role joins Genie's four.
ALTER TABLE agents DROP CONSTRAINT agents_role_check;
ALTER TABLE agents ADD CONSTRAINT agents_role_check CHECK (role IN ('engineer', 'reviewer', 'qa', 'fix', 'planner'));

-- Where an executing wish is: its groups run, its branch is reviewed (by an agent, then a person
-- when the project asks for both), or a fix agent works on the review's notes.
ALTER TABLE wishes ADD COLUMN phase text NOT NULL DEFAULT 'groups'
    CHECK (phase IN ('groups', 'agent_review', 'human_review', 'fix'));
-- `human` when the conductor gave up on a step and a person must act (v0's handoff); the reason
-- is `failure_reason`.
ALTER TABLE wishes ADD COLUMN assignee text CHECK (assignee IS NULL OR length(assignee) BETWEEN 1 AND 100);
-- The provider the wish's agents use unless a group names its own.
ALTER TABLE wishes ADD COLUMN provider text CHECK (provider IS NULL OR length(provider) BETWEEN 1 AND 64);
-- The latest review's notes, for the fix agent and the page.
ALTER TABLE wishes ADD COLUMN review_notes text;
-- Finds the wishes the conductor has something to do for without reading finished ones.
CREATE INDEX wishes_conducted ON wishes (status, created_at)
    WHERE status IN ('draft', 'queued', 'executing') AND NOT held;

-- A group's run: its branch, the wish-branch commit it started from, and what its agent
-- reported. `reported_at` set and status `in_progress`: done was reported and the group's
-- branch waits to be merged into the wish's branch.
ALTER TABLE tasks ADD COLUMN branch text;
ALTER TABLE tasks ADD COLUMN base_commit text;
ALTER TABLE tasks ADD COLUMN head_commit text;
ALTER TABLE tasks ADD COLUMN reported_at timestamptz;
-- The wish-branch merge that integrated the group.
ALTER TABLE tasks ADD COLUMN merge_commit text;
CREATE INDEX tasks_reported ON tasks (wish_id) WHERE reported_at IS NOT NULL AND status = 'in_progress';
