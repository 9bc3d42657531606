-- Wishes: a user's request carried through v0's operation lifecycle.
CREATE TABLE wishes (
    id               uuid PRIMARY KEY,
    slug             text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    project_id       uuid NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
    title            text NOT NULL CHECK (length(title) BETWEEN 1 AND 300),
    description      text NOT NULL DEFAULT '',
    status           text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'planned', 'queued', 'executing',
                         'completed', 'pending_merge', 'merged', 'failed', 'conflict', 'interrupted', 'cancelled')),
    held             boolean NOT NULL DEFAULT false,
    held_at          timestamptz,
    branch           text,
    review_iteration integer NOT NULL DEFAULT 0 CHECK (review_iteration >= 0),
    review_cap       integer NOT NULL DEFAULT 3 CHECK (review_cap >= 1),
    failure_reason   text,
    board_id         uuid REFERENCES boards (id) ON DELETE SET NULL,
    column_id        uuid REFERENCES board_columns (id) ON DELETE SET NULL,
    queued_at        timestamptz,
    started_at       timestamptz,
    completed_at     timestamptz,
    merged_at        timestamptz,
    version          integer NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wishes_project ON wishes (project_id);
CREATE INDEX wishes_column ON wishes (column_id);

-- A wish cannot start executing until every wish it is blocked by has merged.
CREATE TABLE wish_blockers (
    wish_id    uuid NOT NULL REFERENCES wishes (id) ON DELETE CASCADE,
    blocked_by uuid NOT NULL REFERENCES wishes (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (wish_id, blocked_by),
    CHECK (wish_id <> blocked_by)
);
CREATE INDEX wish_blockers_blocked_by ON wish_blockers (blocked_by);

-- Tasks: the one unit of work. A wish's execution groups are tasks with wish_id and group_key.
CREATE TABLE tasks (
    id                 uuid PRIMARY KEY,
    project_id         uuid NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
    wish_id            uuid REFERENCES wishes (id) ON DELETE CASCADE,
    group_key          text,
    title              text NOT NULL CHECK (length(title) BETWEEN 1 AND 300),
    goal               text NOT NULL DEFAULT '',
    status             text NOT NULL CHECK (status IN ('blocked', 'ready', 'in_progress', 'waiting_input',
                           'done', 'failed', 'cancelled')),
    assignee           text CHECK (assignee IS NULL OR length(assignee) BETWEEN 1 AND 100),
    provider           text,
    result             text,
    question           text,
    iterations         integer NOT NULL DEFAULT 0 CHECK (iterations >= 0),
    max_iterations     integer NOT NULL DEFAULT 10 CHECK (max_iterations >= 1),
    board_id           uuid REFERENCES boards (id) ON DELETE SET NULL,
    column_id          uuid REFERENCES board_columns (id) ON DELETE SET NULL,
    -- How many dependencies are not yet done. Kept (not derived on read) because completing a
    -- task must touch only its direct dependents, and the row lock on this counter is what makes
    -- two concurrent completions agree on which of them made a dependent ready.
    unmet_dependencies integer NOT NULL DEFAULT 0 CHECK (unmet_dependencies >= 0),
    started_at         timestamptz,
    completed_at       timestamptz,
    version            integer NOT NULL DEFAULT 1,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (wish_id, group_key),
    CHECK ((wish_id IS NULL) = (group_key IS NULL))
);
CREATE INDEX tasks_project ON tasks (project_id, created_at, id);
CREATE INDEX tasks_wish ON tasks (wish_id) WHERE wish_id IS NOT NULL;
CREATE INDEX tasks_column ON tasks (column_id) WHERE column_id IS NOT NULL;
CREATE INDEX tasks_board ON tasks (board_id) WHERE board_id IS NOT NULL;
CREATE INDEX tasks_status ON tasks (status, created_at, id);
CREATE INDEX tasks_assignee ON tasks (assignee, created_at, id) WHERE assignee IS NOT NULL;
CREATE INDEX tasks_order ON tasks (created_at, id);
-- Finds a wish's unfinished groups without scanning the finished ones.
CREATE INDEX tasks_wish_open ON tasks (wish_id) WHERE wish_id IS NOT NULL AND status <> 'done';

CREATE TABLE task_dependencies (
    task_id    uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    depends_on uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, depends_on),
    CHECK (task_id <> depends_on)
);
CREATE INDEX task_dependencies_depends_on ON task_dependencies (depends_on);
