-- The operator's side (docs/console.md, idemhook events dismiss, idemhook
-- audit list): what operators did, failed events they dismissed, test-mode
-- events counted apart, and every delivery attempt of an outbox row.
--
-- A failed event that can never apply (a test payment, a payment made
-- outside the shop) is dismissed with a reason: it stays failed, but no
-- longer counts as open (idemhook_events_failed_open, the
-- IdemhookAcknowledgedButFailedEvents alert). A test-mode event (Stripe
-- livemode false, Adyen live "false") is counted apart and never pages.
ALTER TABLE events ADD COLUMN test_mode INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN dismissed_at INTEGER;
ALTER TABLE events ADD COLUMN dismissed_by TEXT;
ALTER TABLE events ADD COLUMN dismiss_reason TEXT;
-- One order's timeline (the console's order page, events list --order).
CREATE INDEX events_order_ref ON events (order_ref) WHERE order_ref IS NOT NULL;

-- One row per operator action, from the CLI or the console: who (cli:USER,
-- console:TOKEN-NAME), when (ms), what (events.dismiss, outbox.retry, ...),
-- its target (event:ID, outbox:ID, order:ID), why (a reason, or NULL) and
-- the result (ok, refused: ..., error).
CREATE TABLE audit_log (
	id INTEGER PRIMARY KEY,
	at INTEGER NOT NULL,
	actor TEXT NOT NULL,
	action TEXT NOT NULL,
	target TEXT NOT NULL,
	reason TEXT,
	result TEXT NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);

-- Every delivery attempt of an outbox row: its time, HTTP status (NULL when
-- none came back), error, latency and the start of the response. Kept for
-- the newest attempts of each row only (handlers/outbox.c), and deleted
-- with the row (gc).
CREATE TABLE outbox_attempts (
	id INTEGER PRIMARY KEY,
	outbox_id INTEGER NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
	attempt INTEGER NOT NULL,
	at INTEGER NOT NULL,
	http_status INTEGER,
	error TEXT,
	latency_ms INTEGER,
	excerpt TEXT
);
CREATE INDEX outbox_attempts_row ON outbox_attempts (outbox_id, id);
