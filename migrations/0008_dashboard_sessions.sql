-- Dashboard sessions: a browser's login, held in an HttpOnly cookie of which only the SHA-256 is
-- kept. A session acts with the authority of the admin token it was opened with, so revoking that
-- token ends its sessions at once. `csrf` is the token every state-changing request must echo.
CREATE TABLE dashboard_sessions (
    id           uuid PRIMARY KEY,
    hash         text NOT NULL UNIQUE,
    token_id     uuid NOT NULL REFERENCES tokens (id) ON DELETE CASCADE,
    csrf         text NOT NULL CHECK (length(csrf) >= 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    ended_at     timestamptz
);
CREATE INDEX dashboard_sessions_token ON dashboard_sessions (token_id);

-- One-time login links (`/login?code=…`): each code opens one session, once, before it expires.
-- Only the code's SHA-256 is kept; the token is the authority the session will carry.
CREATE TABLE dashboard_login_codes (
    hash       text PRIMARY KEY,
    token_id   uuid NOT NULL REFERENCES tokens (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX dashboard_login_codes_token ON dashboard_login_codes (token_id);

-- What happened to one thing (a wish's reviews, an agent's states) reads `events_subject`,
-- made in 0007 for the mailbox.
