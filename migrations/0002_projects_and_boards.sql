-- Projects: a named scope over one git repository (multiclaude's Repository).
CREATE TABLE projects (
    id                 uuid PRIMARY KEY,
    slug               text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    repo_path          text NOT NULL,
    target_branch      text NOT NULL DEFAULT 'main' CHECK (length(target_branch) BETWEEN 1 AND 200),
    github_url         text,
    fork_config        jsonb NOT NULL DEFAULT '{"is_fork": false, "upstream_url": null, "upstream_owner": null, "upstream_repo": null, "force_fork_mode": false}',
    merge_queue_config jsonb NOT NULL DEFAULT '{"enabled": true, "track_mode": "all"}'
        CHECK (merge_queue_config->>'track_mode' IN ('all', 'author', 'assigned')),
    pr_shepherd_config jsonb NOT NULL DEFAULT '{"enabled": false, "track_mode": "author"}'
        CHECK (pr_shepherd_config->>'track_mode' IN ('all', 'author', 'assigned')),
    version            integer NOT NULL DEFAULT 1,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Boards: a project's Kanban pipeline.
CREATE TABLE boards (
    id         uuid PRIMARY KEY,
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    version    integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);
CREATE INDEX boards_project ON boards (project_id);

-- Ordered columns; `position` is 0-based and dense. Deferrable so a reorder can swap positions.
CREATE TABLE board_columns (
    id           uuid PRIMARY KEY,
    board_id     uuid NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    position     integer NOT NULL CHECK (position >= 0),
    gate         text NOT NULL DEFAULT 'auto' CHECK (gate IN ('auto', 'human', 'agent')),
    action_skill text,
    wip_limit    integer CHECK (wip_limit IS NULL OR wip_limit > 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (board_id, name),
    CONSTRAINT board_columns_position UNIQUE (board_id, position) DEFERRABLE INITIALLY IMMEDIATE
);

-- Reusable column blueprints: [{name, gate, action_skill, wip_limit}].
CREATE TABLE board_templates (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
    description text NOT NULL DEFAULT '',
    columns     jsonb NOT NULL CHECK (jsonb_typeof(columns) = 'array'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
