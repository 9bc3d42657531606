-- Generic inbound hooks already acted on, by the sender's `webhook-id`: a replayed or retried
-- delivery is answered without filing its work twice. Kept a day; signatures older than five
-- minutes are refused anyway.
CREATE TABLE inbound_deliveries (
    hook        text NOT NULL,
    message_id  text NOT NULL CHECK (length(message_id) BETWEEN 1 AND 200),
    received_at timestamptz NOT NULL DEFAULT now(),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (hook, message_id)
);
CREATE INDEX inbound_deliveries_received ON inbound_deliveries (received_at);
