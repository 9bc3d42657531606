-- The menu option an answer is delivered as (key presses on the agent's screen, not a paste),
-- recorded with the Enter that picks it: a delivery resumed after an outage never pastes the
-- answer, and presses Enter again only while the menu still shows that option highlighted.
ALTER TABLE messages ADD COLUMN chosen_option integer CHECK (chosen_option > 0);
