-- PostgreSQL: the single-column CHECK constraints of the tables every new
-- callback writes (orders, idempotency_records, points_ledger, order_refs)
-- become domains with the same rule (issue 25; docs/benchmarks.md, "Server
-- CPU per callback"). The executor reads a table's CHECK expressions back
-- from their stored text, plans them and compiles them on every execution
-- of every INSERT and UPDATE of the table (ExecRelCheck: the state lives
-- for one statement): on this schema 16 expressions per callback, some 14 %
-- of the writer's backend. A domain's rule is read and planned once per
-- session (the type cache), is checked only where a value is assigned to
-- its column, and refuses the same values: the rules stay the database's.
-- The rule that joins several columns of idempotency_records (an event row
-- has kind, outcome and both times, or none) stays a CHECK constraint.
-- A later migration that changes a rule alters its domain (ALTER DOMAIN ...
-- DROP CONSTRAINT / ADD CONSTRAINT, named below), no longer the table's.
-- Nothing is rewritten: each column takes its domain while the domain has
-- no rule yet (binary coercible, indexes kept), then ALTER DOMAIN ADD
-- CONSTRAINT checks the rows already there in one scan per table.
-- SQLite checks its CHECK constraints from a compiled statement, so
-- migrations/0015 changes nothing.
CREATE DOMAIN nonnegative_amount AS BIGINT;
CREATE DOMAIN order_status AS TEXT;
CREATE DOMAIN fulfillment_status AS TEXT;
CREATE DOMAIN record_status AS TEXT;
CREATE DOMAIN event_outcome AS TEXT;
CREATE DOMAIN event_source AS TEXT;
CREATE DOMAIN points_reason AS TEXT;
CREATE DOMAIN order_ref_kind AS TEXT;

-- The view reads outcome and source, whose types change.
DROP VIEW events;

ALTER TABLE orders
	DROP CONSTRAINT orders_amount_check,
	DROP CONSTRAINT orders_status_check,
	DROP CONSTRAINT orders_refunded_amount_check,
	DROP CONSTRAINT orders_fulfillment_status_check,
	DROP CONSTRAINT orders_disputed_amount_check,
	DROP CONSTRAINT orders_chargeback_amount_check,
	ALTER COLUMN amount TYPE nonnegative_amount,
	ALTER COLUMN status TYPE order_status,
	ALTER COLUMN refunded_amount TYPE nonnegative_amount,
	ALTER COLUMN fulfillment_status TYPE fulfillment_status,
	ALTER COLUMN disputed_amount TYPE nonnegative_amount,
	ALTER COLUMN chargeback_amount TYPE nonnegative_amount;

ALTER TABLE idempotency_records
	DROP CONSTRAINT idempotency_records_0012_status_check,
	DROP CONSTRAINT idempotency_records_0012_outcome_check,
	DROP CONSTRAINT idempotency_records_0012_source_check,
	ALTER COLUMN status TYPE record_status,
	ALTER COLUMN outcome TYPE event_outcome,
	ALTER COLUMN source TYPE event_source;

ALTER TABLE points_ledger
	DROP CONSTRAINT points_ledger_reason_check,
	ALTER COLUMN reason TYPE points_reason;

ALTER TABLE order_refs
	DROP CONSTRAINT order_refs_kind_check,
	ALTER COLUMN kind TYPE order_ref_kind;

ALTER DOMAIN nonnegative_amount ADD CONSTRAINT nonnegative_amount_check CHECK (VALUE >= 0);
ALTER DOMAIN order_status ADD CONSTRAINT order_status_check
	CHECK (VALUE IN ('pending', 'authorized', 'paid', 'partially_refunded', 'refunded',
		'disputed', 'cancelled', 'expired'));
ALTER DOMAIN fulfillment_status ADD CONSTRAINT fulfillment_status_check
	CHECK (VALUE IN ('pending', 'notified', 'failed', 'compensated'));
ALTER DOMAIN record_status ADD CONSTRAINT record_status_check
	CHECK (VALUE IN ('processing', 'done', 'failed'));
ALTER DOMAIN event_outcome ADD CONSTRAINT event_outcome_check CHECK (VALUE IN ('done', 'failed'));
ALTER DOMAIN event_source ADD CONSTRAINT event_source_check
	CHECK (VALUE IN ('callback', 'reconcile'));
ALTER DOMAIN points_reason ADD CONSTRAINT points_reason_check
	CHECK (VALUE IN ('award', 'clawback', 'restore'));
ALTER DOMAIN order_ref_kind ADD CONSTRAINT order_ref_kind_check
	CHECK (VALUE IN ('payment', 'charge'));

CREATE VIEW events AS
	SELECT id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,
		refund_cumulative, payload, outcome, effect, reason, received_at, processed_at,
		reprocessed, source, test_mode, dismissed_at, dismissed_by, dismiss_reason
	FROM idempotency_records WHERE kind IS NOT NULL;
