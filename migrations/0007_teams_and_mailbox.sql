-- Teams (Genie's model): a branch-named group of agents sharing one `git clone --shared` of the
-- project's repository, on the team's branch made from `base_branch`.
CREATE TABLE teams (
    id          uuid PRIMARY KEY,
    -- Also the git branch of the team's clone.
    name        text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
    base_branch text NOT NULL CHECK (length(base_branch) BETWEEN 1 AND 200),
    status      text NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'in_progress', 'done', 'blocked')),
    clone_path  text NOT NULL,
    leader      text REFERENCES agents (name) ON DELETE SET NULL,
    version     integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX teams_order ON teams (created_at, id);
CREATE INDEX teams_project ON teams (project_id, created_at, id);

-- Members are agents whose `team` names the team; an agent spawned into it works in its clone.
ALTER TABLE agents ADD CONSTRAINT agents_team_fkey FOREIGN KEY (team) REFERENCES teams (name) ON DELETE SET NULL;
ALTER TABLE agents DROP CONSTRAINT agents_clone_mode_check;
ALTER TABLE agents ADD CONSTRAINT agents_clone_mode_check CHECK (clone_mode IN ('agent', 'none', 'team'));

-- A team's group chat: history only, oldest first by (created_at, id).
CREATE TABLE team_chat (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    -- `operator` or an agent's name (kept as text: the history outlives the agent).
    sender     text NOT NULL CHECK (length(sender) BETWEEN 1 AND 63),
    body       text NOT NULL CHECK (length(body) BETWEEN 1 AND 65536),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX team_chat_order ON team_chat (team_id, created_at, id);

-- The mailbox. A message is committed here before anything else happens; the worker of the
-- recipient's node delivers it into the pane when the agent is idle and sets `delivered_at` only
-- once a turn that took it is confirmed. The attempt columns record, before each step is taken,
-- how far delivery got in which pane, so a restarted worker neither loses it nor types it twice.
CREATE TABLE messages (
    id             uuid PRIMARY KEY,
    -- Delivery order per recipient (ids are random).
    seq            bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    sender         text NOT NULL CHECK (length(sender) BETWEEN 1 AND 63),
    recipient      text NOT NULL CHECK (length(recipient) BETWEEN 1 AND 63),
    -- The recipient agent; NULL for `operator`. Its inbox goes with it.
    recipient_id   uuid REFERENCES agents (id) ON DELETE CASCADE,
    body           text NOT NULL CHECK (length(body) >= 1),
    read_at        timestamptz,
    delivered_at   timestamptz,
    -- How delivery was confirmed: the UserPromptSubmit hook carried the text, or the pane showed
    -- the text leave its input line, or the agent started a turn after Enter (agents without hooks),
    -- or `operator` (nothing to type).
    confirmed_by   text CHECK (confirmed_by IS NULL OR confirmed_by IN ('hook', 'screen', 'state', 'operator')),
    attempts       integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- The pane the current attempt pastes into, recorded before the paste.
    attempt_pane   text,
    -- The pane's input line as it was before the paste: the line is empty again when it shows this.
    input_before   text,
    -- The paste finished (the text is in the input line of `attempt_pane`).
    pasted_at      timestamptz,
    -- Enter is about to be pressed (recorded before pressing it).
    submitted_at   timestamptz,
    enter_presses  integer NOT NULL DEFAULT 0 CHECK (enter_presses >= 0),
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((recipient = 'operator') = (recipient_id IS NULL)),
    CHECK ((delivered_at IS NULL) = (confirmed_by IS NULL))
);
CREATE INDEX messages_inbox ON messages (recipient, created_at, id);
CREATE INDEX messages_sender ON messages (sender, created_at, id);
CREATE INDEX messages_order ON messages (created_at, id);
-- The worker's queue: what is still to be delivered, in order per agent.
CREATE INDEX messages_pending ON messages (recipient_id, seq) WHERE delivered_at IS NULL;
-- Delivery asks whether an agent started a turn after Enter: its state changes since then.
CREATE INDEX events_subject ON events (subject, id);
