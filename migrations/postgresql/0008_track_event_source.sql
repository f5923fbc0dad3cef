-- Where each processed event came from: a callback the provider sent
-- ('callback', every row before this migration), or reconciliation asking
-- the provider what became of a payment whose callback never arrived
-- ('reconcile': idemhook reconcile and its periodic worker, docs/reconcile.md).
-- idemhook events list shows it.
ALTER TABLE events ADD COLUMN source TEXT NOT NULL DEFAULT 'callback'
	CHECK (source IN ('callback', 'reconcile'));
