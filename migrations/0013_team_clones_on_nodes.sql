-- A team's clone is made by the worker of the node that runs its agents (the first node to claim
-- one of them is pinned to the team), not by whichever process served the API call: until then
-- the team has neither a clone nor a node.
ALTER TABLE teams ALTER COLUMN clone_path DROP NOT NULL;
ALTER TABLE teams ADD COLUMN node_id text REFERENCES nodes (id) ON DELETE SET NULL;
CREATE INDEX teams_node ON teams (node_id) WHERE node_id IS NOT NULL;
