-- A project's repository may be a git remote (`repo_url`) instead of a path on the server: each
-- node then keeps its own mirror of it under its data directory. `repo_path` is empty for such a
-- project; exactly one of the two names the repository. `repo_secret` is the remote's
-- credential, when the node's own git configuration has none (never shown, never in a clone).
-- `push_remote` names the remote a `repo_path` project's merged target is pushed to: NULL means
-- `origin` when the repository has one, '' means none.
ALTER TABLE projects
    ADD COLUMN repo_url text CHECK (repo_url IS NULL OR length(repo_url) BETWEEN 1 AND 2048),
    ADD COLUMN repo_secret text,
    ADD COLUMN push_remote text CHECK (push_remote IS NULL OR length(push_remote) <= 200),
    ADD CONSTRAINT projects_one_repository CHECK ((repo_url IS NULL) = (repo_path <> ''));
