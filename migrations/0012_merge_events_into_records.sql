-- One row and one unique index per claimed key (issue 24, docs/benchmarks.md
-- "Where the bytes go"): a callback's event and its idempotency record are
-- 1:1, yet each was a row of its own with its own (scope, idem_key) unique
-- index, so a unique callback wrote two random index leaves and two tables.
-- The event's columns move onto idempotency_records; a row is an event when
-- its event columns are set (kind, outcome, received_at and processed_at
-- together, as the CHECK says). The order API's keys are rows without an
-- event. `events` becomes a view of the event rows with the columns it had
-- (0003, 0005, 0008, 0011), for readers; writers write idempotency_records.
--
-- Ids: an event keeps its id (console URLs, `idemhook events ... ID`,
-- audit_log targets event:ID), and its record takes it. A record without an
-- event (the order API's, or one whose event gc removed) gets a new id after
-- every event's: record ids were never shown or referenced outside a
-- transaction. Nothing references either table by a foreign key.
--
-- An event whose record gc had removed (events_retention longer than the
-- scope's retention) becomes a row whose record part has expired
-- (created_at 0, fingerprint empty): a redelivery of its key runs again as
-- new, as it did with no record, and gc keeps the row for its event.
CREATE TABLE idempotency_records_0012 (
	id INTEGER PRIMARY KEY,
	scope TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('processing', 'done', 'failed')),
	fingerprint BLOB NOT NULL,
	reply_status INTEGER,
	reply_content_type TEXT,
	reply_headers TEXT,
	reply_body BLOB,
	lease_until INTEGER,
	fence_token INTEGER NOT NULL DEFAULT 1,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	-- the event, when the key is a provider's callback (received_at set)
	type TEXT,
	kind TEXT,
	order_ref TEXT,
	payment_ref TEXT,
	refund_ref TEXT,
	amount INTEGER,
	currency TEXT,
	refund_cumulative INTEGER NOT NULL DEFAULT 0,
	payload BLOB,
	outcome TEXT CHECK (outcome IN ('done', 'failed')),
	effect TEXT,
	reason TEXT,
	received_at INTEGER,
	processed_at INTEGER,
	reprocessed INTEGER NOT NULL DEFAULT 0,
	source TEXT NOT NULL DEFAULT 'callback' CHECK (source IN ('callback', 'reconcile')),
	test_mode INTEGER NOT NULL DEFAULT 0,
	dismissed_at INTEGER,
	dismissed_by TEXT,
	dismiss_reason TEXT,
	CHECK ((received_at IS NULL) = (kind IS NULL) AND (received_at IS NULL) = (outcome IS NULL)
		AND (received_at IS NULL) = (processed_at IS NULL))
);

INSERT INTO idempotency_records_0012 (id, scope, idem_key, status, fingerprint, reply_status,
		reply_content_type, reply_headers, reply_body, lease_until, fence_token, created_at,
		updated_at, type, kind, order_ref, payment_ref, refund_ref, amount, currency,
		refund_cumulative, payload, outcome, effect, reason, received_at, processed_at,
		reprocessed, source, test_mode, dismissed_at, dismissed_by, dismiss_reason)
	SELECT e.id, e.scope, e.idem_key, r.status, r.fingerprint, r.reply_status,
		r.reply_content_type, r.reply_headers, r.reply_body, r.lease_until, r.fence_token,
		r.created_at, r.updated_at, e.type, e.kind, e.order_ref, e.payment_ref, e.refund_ref,
		e.amount, e.currency, e.refund_cumulative, e.payload, e.outcome, e.effect, e.reason,
		e.received_at, e.processed_at, e.reprocessed, e.source, e.test_mode, e.dismissed_at,
		e.dismissed_by, e.dismiss_reason
	FROM events AS e JOIN idempotency_records AS r
		ON r.scope = e.scope AND r.idem_key = e.idem_key
	ORDER BY e.id;

INSERT INTO idempotency_records_0012 (id, scope, idem_key, status, fingerprint, fence_token,
		created_at, updated_at, type, kind, order_ref, payment_ref, refund_ref, amount,
		currency, refund_cumulative, payload, outcome, effect, reason, received_at,
		processed_at, reprocessed, source, test_mode, dismissed_at, dismissed_by,
		dismiss_reason)
	SELECT e.id, e.scope, e.idem_key, e.outcome, x'', 1, 0, e.processed_at, e.type, e.kind,
		e.order_ref, e.payment_ref, e.refund_ref, e.amount, e.currency, e.refund_cumulative,
		e.payload, e.outcome, e.effect, e.reason, e.received_at, e.processed_at,
		e.reprocessed, e.source, e.test_mode, e.dismissed_at, e.dismissed_by,
		e.dismiss_reason
	FROM events AS e
	WHERE NOT EXISTS (SELECT 1 FROM idempotency_records AS r
		WHERE r.scope = e.scope AND r.idem_key = e.idem_key)
	ORDER BY e.id;

INSERT INTO idempotency_records_0012 (scope, idem_key, status, fingerprint, reply_status,
		reply_content_type, reply_headers, reply_body, lease_until, fence_token, created_at,
		updated_at)
	SELECT r.scope, r.idem_key, r.status, r.fingerprint, r.reply_status, r.reply_content_type,
		r.reply_headers, r.reply_body, r.lease_until, r.fence_token, r.created_at,
		r.updated_at
	FROM idempotency_records AS r
	WHERE NOT EXISTS (SELECT 1 FROM events AS e
		WHERE e.scope = r.scope AND e.idem_key = r.idem_key)
	ORDER BY r.id;

DROP TABLE events;
DROP TABLE idempotency_records;
ALTER TABLE idempotency_records_0012 RENAME TO idempotency_records;

-- The one unique index, the arbiter of a duplicate.
CREATE UNIQUE INDEX idempotency_records_scope_key ON idempotency_records (scope, idem_key);
-- gc of the keys without an event by age (an event row goes by
-- received_at, below), and the processing count (stats.c).
CREATE INDEX idempotency_records_created_at ON idempotency_records (created_at)
	WHERE received_at IS NULL;
CREATE INDEX idempotency_records_processing ON idempotency_records (updated_at)
	WHERE status = 'processing';
-- The event rows by time (lists, gc by events_retention), the failed ones
-- (stats, metrics, the open-failures alert), one order's timeline: partial,
-- so an order API key writes none of them.
CREATE INDEX events_received_at ON idempotency_records (received_at)
	WHERE received_at IS NOT NULL;
CREATE INDEX events_failed ON idempotency_records (received_at) WHERE outcome = 'failed';
CREATE INDEX events_order_ref ON idempotency_records (order_ref) WHERE order_ref IS NOT NULL;

-- The view selects the event rows on kind, which no index holds: a partial
-- index on the view's own condition would be taken by SQLite for every
-- query on the view, even one that walks the rows by id.
CREATE VIEW events AS
	SELECT id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,
		refund_cumulative, payload, outcome, effect, reason, received_at, processed_at,
		reprocessed, source, test_mode, dismissed_at, dismissed_by, dismiss_reason
	FROM idempotency_records WHERE kind IS NOT NULL;
