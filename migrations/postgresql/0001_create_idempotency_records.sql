-- The idempotency table of DESIGN.md: one row per (scope, key). Times are
-- milliseconds since the Unix epoch. Business state is never kept here.
CREATE TABLE idempotency_records (
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
	updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX idempotency_records_scope_key ON idempotency_records (scope, idem_key);
CREATE INDEX idempotency_records_created_at ON idempotency_records (created_at);
CREATE INDEX idempotency_records_processing ON idempotency_records (updated_at)
	WHERE status = 'processing';
