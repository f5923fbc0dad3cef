-- Business state: orders, the refunds applied to them, and the points ledger.
-- Status moves only through conditional updates (handlers/orders.c).
CREATE TABLE orders (
	id TEXT PRIMARY KEY,
	amount INTEGER NOT NULL CHECK (amount >= 0),
	currency TEXT NOT NULL,
	status TEXT NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'paid', 'partially_refunded', 'refunded')),
	refunded_amount INTEGER NOT NULL DEFAULT 0 CHECK (refunded_amount >= 0),
	customer_ref TEXT,
	provider TEXT,
	payment_ref TEXT,
	fulfillment_status TEXT NOT NULL DEFAULT 'pending'
		CHECK (fulfillment_status IN ('pending', 'notified', 'failed', 'compensated')),
	needs_operator INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	paid_at INTEGER,
	refunded_at INTEGER,
	updated_at INTEGER NOT NULL
);
CREATE INDEX orders_status ON orders (status);

-- One row per provider refund; the unique key makes each refund count once.
CREATE TABLE refunds (
	id INTEGER PRIMARY KEY,
	order_id TEXT NOT NULL REFERENCES orders (id),
	provider TEXT NOT NULL,
	refund_ref TEXT NOT NULL,
	amount INTEGER NOT NULL CHECK (amount > 0),
	created_at INTEGER NOT NULL,
	UNIQUE (order_id, provider, refund_ref)
);

-- Each award and each clawback happens at most once, even after the
-- idempotency record that led to it has expired.
CREATE TABLE points_ledger (
	id INTEGER PRIMARY KEY,
	order_id TEXT NOT NULL REFERENCES orders (id),
	reason TEXT NOT NULL CHECK (reason IN ('award', 'clawback')),
	ref TEXT NOT NULL,
	points INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	UNIQUE (order_id, reason, ref)
);
