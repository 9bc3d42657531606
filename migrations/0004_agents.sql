-- Worker nodes: each worker process registers itself and keeps a heartbeat, so agents of a node
-- whose heartbeat stopped can be found and settled by another.
CREATE TABLE nodes (
    id           text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 100),
    host         text NOT NULL,
    role         text NOT NULL CHECK (role IN ('serve', 'worker')),
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX nodes_heartbeat ON nodes (heartbeat_at);

-- The agent registry (Genie's agents table with multiclaude's Agent fields).
CREATE TABLE agents (
    id                  uuid PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    project_id          uuid NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
    kind                text NOT NULL CHECK (kind IN ('supervisor', 'worker', 'merge-queue', 'workspace', 'review',
                            'pr-shepherd', 'generic-persistent')),
    role                text NOT NULL CHECK (role IN ('engineer', 'reviewer', 'qa', 'fix')),
    provider            text NOT NULL CHECK (length(provider) BETWEEN 1 AND 64),
    state               text NOT NULL DEFAULT 'spawning' CHECK (state IN ('spawning', 'working', 'idle',
                            'permission', 'question', 'done', 'error', 'suspended')),
    tmux_session        text,
    tmux_window         text,
    tmux_pane           text,
    pid                 integer,
    -- 'agent': its own clone, made by the worker; 'none': runs in the project's repository.
    clone_mode          text NOT NULL DEFAULT 'agent' CHECK (clone_mode IN ('agent', 'none')),
    clone_path          text,
    branch              text,
    repo                text NOT NULL,
    -- Passed to the provider at start (`claude --session-id`) and used to resume it.
    provider_session_id uuid NOT NULL,
    team                text,
    wish_id             uuid REFERENCES wishes (id) ON DELETE SET NULL,
    task_id             uuid REFERENCES tasks (id) ON DELETE SET NULL,
    task                text,
    summary             text,
    failure_reason      text,
    -- NULL until a worker claims the spawning row; then only that node manages the agent.
    node_id             text REFERENCES nodes (id) ON DELETE SET NULL,
    last_activity       timestamptz,
    last_nudge          timestamptz,
    nudge_count         integer NOT NULL DEFAULT 0 CHECK (nudge_count >= 0),
    ready_for_cleanup   boolean NOT NULL DEFAULT false,
    -- Set with a usage limit: the worker resumes the agent after this time.
    suspended_until     timestamptz,
    -- The last hook seen and the state it mapped to: a hook wins over the screen for a while,
    -- whichever process reads the screen.
    last_hook_at        timestamptz,
    last_hook_state     text CHECK (last_hook_state IS NULL OR last_hook_state IN ('spawning', 'working', 'idle',
                            'permission', 'question', 'done', 'error', 'suspended')),
    version             integer NOT NULL DEFAULT 1,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_order ON agents (created_at, id);
CREATE INDEX agents_project ON agents (project_id, created_at, id);
CREATE INDEX agents_state ON agents (state, created_at, id);
CREATE INDEX agents_node ON agents (node_id, state) WHERE node_id IS NOT NULL;
CREATE INDEX agents_team ON agents (team, created_at, id) WHERE team IS NOT NULL;
CREATE INDEX agents_wish ON agents (wish_id) WHERE wish_id IS NOT NULL;
CREATE INDEX agents_task ON agents (task_id) WHERE task_id IS NOT NULL;
-- The worker's queue: spawning rows no node has claimed yet.
CREATE INDEX agents_unclaimed ON agents (created_at, id) WHERE state = 'spawning' AND node_id IS NULL;

-- Agent tokens: scope 'agent', tied to one agent, allowed only to speak as that agent.
ALTER TABLE tokens ADD COLUMN agent_id uuid REFERENCES agents (id) ON DELETE CASCADE;
ALTER TABLE tokens DROP CONSTRAINT tokens_scope_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_scope_check CHECK (scope IN ('read', 'write', 'admin', 'agent'));
ALTER TABLE tokens ADD CONSTRAINT tokens_agent_scope CHECK ((scope = 'agent') = (agent_id IS NOT NULL));
CREATE INDEX tokens_agent ON tokens (agent_id) WHERE agent_id IS NOT NULL;
