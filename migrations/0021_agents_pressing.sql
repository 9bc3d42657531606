-- The overview's most pressing agents (`db::agents::most_pressing`): the live ones, those asking a
-- person first, then the most recently active, 50 of them. Without an index in that order every
-- live agent's row was read and sorted on each view: with 500 agents changing state a few
-- hundred times a second, 12–16 ms per view on a loaded 2-core machine, the slowest read of the
-- page. The expression and the predicate are the query's own, so the planner matches them.
CREATE INDEX agents_pressing ON agents
    ((state IN ('permission', 'question')) DESC, last_activity DESC NULLS LAST, created_at, id)
    WHERE state IN ('spawning', 'working', 'idle', 'permission', 'question');
