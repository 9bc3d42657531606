-- How many of a wish's groups are not done yet. The one path that completes a group decrements
-- it with an UPDATE, which takes the wish's row lock and re-reads the latest value, so of two
-- concurrent last completions exactly one sees 0 — in one statement, whatever the wish's size.
ALTER TABLE wishes ADD COLUMN groups_open integer NOT NULL DEFAULT 0 CHECK (groups_open >= 0);

UPDATE wishes w
SET groups_open = (SELECT count(*) FROM tasks t WHERE t.wish_id = w.id AND t.status <> 'done');

-- Every group-status change updates each of the task's indexes; `tasks_wish` only repeats the
-- leading column of UNIQUE (wish_id, group_key), which serves the same lookups.
DROP INDEX tasks_wish;
