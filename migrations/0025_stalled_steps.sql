-- A step the server keeps retrying because a tool refuses it (git cannot lock a ref, say): what
-- the person sees on the wish or entry (and on "needs you" after a while), in the tool's words,
-- and when it is tried next (a backoff, not four tries a second). One row per subject; the row
-- goes when the step succeeds.
CREATE TABLE stalled_steps (
    -- What is stuck: `wish:<id>` (merging its reported groups), `merge_entry:<id>`.
    subject text PRIMARY KEY,
    step text NOT NULL,
    error text NOT NULL,
    since timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 1 CHECK (attempts > 0),
    retry_at timestamptz NOT NULL
);
