-- Issue 41: the merge queue gates batches of entries on projected heads, several at once, bisects
-- a red batch and runs entries with disjoint changes in lanes of their own. Several entries of a
-- queue are processing at once now (one process's run claims them together, under an advisory
-- lock), and the gates this node runs are recorded, so a restarted process ends a gate its dead
-- predecessor left running before it touches that gate's scratch clone.

ALTER TABLE merge_settings
    -- Entries merged onto one projected head and gated once.
    ADD COLUMN batch_max integer NOT NULL DEFAULT 4 CHECK (batch_max BETWEEN 1 AND 64),
    -- Gates run at once: speculative batches on the heads ahead of them, bisection's parts, lanes.
    ADD COLUMN gate_concurrency integer NOT NULL DEFAULT 4 CHECK (gate_concurrency BETWEEN 1 AND 32),
    -- A red batch is gated once more before it is bisected (a flaky gate).
    ADD COLUMN retry_flaky boolean NOT NULL DEFAULT false;

DROP INDEX merge_queue_one_processing;

-- A gate running on this node: its scratch clone, the process group it runs in and the run of
-- the process that started it; the row goes when the gate ends.
CREATE TABLE merge_gates (
    node        text NOT NULL,
    scratch     text NOT NULL,
    run         timestamptz NOT NULL,
    pgid        integer NOT NULL CHECK (pgid > 1),
    -- `<boot id>:<start time in clock ticks>` of the group's leader: a pid reused after the
    -- group ended (or after a reboot) is never taken for the gate's.
    leader      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node, scratch)
);
