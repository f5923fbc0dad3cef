-- PostgreSQL: indexes only where a query needs them, as 0006 for SQLite.
DROP INDEX IF EXISTS orders_status;
DROP INDEX IF EXISTS events_outcome;
CREATE INDEX events_failed ON events (received_at) WHERE outcome = 'failed';
