-- The outbox: outbound calls written in the same transaction as the business
-- change that caused them, delivered afterwards by the worker (outbound.c).
-- A row's status is its own, never the order's. Times are ms since the epoch.
CREATE TABLE outbox (
	id INTEGER PRIMARY KEY,
	order_id TEXT REFERENCES orders (id),
	call_type TEXT NOT NULL, -- the [outbound] call ("notify", "receipt") or "refund"
	effect TEXT NOT NULL, -- the order change it reports: paid, refunded, ...
	provider TEXT, -- provider instance of the event
	url TEXT NOT NULL,
	content_type TEXT NOT NULL,
	body BLOB NOT NULL,
	idem_key TEXT NOT NULL UNIQUE, -- sent as Idempotency-Key on every attempt
	compensation TEXT NOT NULL DEFAULT 'none'
		CHECK (compensation IN ('none', 'refund', 'manual')),
	-- what the compensation has done so far: queued a refund row, flagged an
	-- operator, or finished (refund applied / operator resolved)
	comp_state TEXT NOT NULL DEFAULT 'none'
		CHECK (comp_state IN ('none', 'queued', 'flagged', 'done')),
	parent_id INTEGER REFERENCES outbox (id), -- the dead row a compensation row is for
	status TEXT NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'delivering', 'retry_wait', 'succeeded', 'dead', 'cancelled')),
	attempts INTEGER NOT NULL DEFAULT 0,
	window_start INTEGER NOT NULL, -- max_age counts from here (reset by a manual retry)
	next_attempt_at INTEGER NOT NULL,
	lease_until INTEGER,
	lease_token INTEGER NOT NULL DEFAULT 0,
	last_status INTEGER, -- HTTP status of the last attempt, NULL when none came back
	last_error TEXT,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	delivered_at INTEGER
);
CREATE INDEX outbox_due ON outbox (status, next_attempt_at);
CREATE INDEX outbox_order ON outbox (order_id);
