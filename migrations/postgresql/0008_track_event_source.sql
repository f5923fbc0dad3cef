-- PostgreSQL: where each processed event came from, as 0008 for SQLite.
ALTER TABLE events ADD COLUMN source TEXT NOT NULL DEFAULT 'callback'
	CHECK (source IN ('callback', 'reconcile'));
