-- Every processed callback event, normalized, with its semantic payload, so
-- operators can list failed ones and reprocess them.
CREATE TABLE events (
	id INTEGER PRIMARY KEY,
	scope TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	type TEXT,
	kind TEXT NOT NULL,
	order_ref TEXT,
	payment_ref TEXT,
	refund_ref TEXT,
	amount INTEGER,
	currency TEXT,
	refund_cumulative INTEGER NOT NULL DEFAULT 0,
	payload BLOB,
	outcome TEXT NOT NULL CHECK (outcome IN ('done', 'failed')),
	effect TEXT,
	reason TEXT,
	received_at INTEGER NOT NULL,
	processed_at INTEGER NOT NULL,
	reprocessed INTEGER NOT NULL DEFAULT 0,
	UNIQUE (scope, idem_key)
);
CREATE INDEX events_outcome ON events (outcome, received_at);
CREATE INDEX events_received_at ON events (received_at);
