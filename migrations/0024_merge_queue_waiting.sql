-- Why a pending entry waits for something outside the queue, in words a person can act on
-- ("uncommitted changes in /home/me/shop": its target branch is checked out in a working tree
-- that is not clean). Set and cleared by the queue's passes; a claim clears it.
ALTER TABLE merge_queue ADD COLUMN waiting text;
