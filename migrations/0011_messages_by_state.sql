-- The mailbox page reads messages still pending, and those delivered, newest first, a page at a
-- time. Pending ones are few among many delivered ones: through `messages_order` a page of them
-- would step over every delivered message in its range. Keyed by the state first, each page of
-- either list is one range read of that page, whether the plan is custom or generic.
CREATE INDEX messages_by_state ON messages ((delivered_at IS NULL), created_at, id);
