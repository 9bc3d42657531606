-- The pane's input line as it showed a pasted message, recorded with the Enter that submits it:
-- a delivery resumed after an outage presses Enter again only while the line still shows the
-- text so, never into a line the text has left (a bare Enter the agent would act on).
ALTER TABLE messages ADD COLUMN input_after text;
