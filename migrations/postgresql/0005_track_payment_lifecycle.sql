-- The whole payment lifecycle (handlers/orders.c, docs/orders.md): orders
-- that are authorised, disputed, cancelled or expired; every reference an
-- order was seen under; refunds that failed; disputes; callbacks that named a
-- payment before idemhook knew its order; points given back.
--
-- SQLite cannot change a CHECK constraint in place, so orders and
-- points_ledger are rebuilt. refunds, outbox and points_ledger reference
-- orders with immediate foreign keys, and foreign keys are on: deferring them
-- lets orders be dropped and created again inside this one transaction. The
-- rows are copied back into the new orders table before COMMIT, which is when
-- the deferred checks run (PRAGMA defer_foreign_keys ends with the
-- transaction).
PRAGMA defer_foreign_keys = ON;

CREATE TABLE orders_before_0005 AS SELECT * FROM orders;
DROP TABLE orders;
CREATE TABLE orders (
	id TEXT PRIMARY KEY,
	amount INTEGER NOT NULL CHECK (amount >= 0),
	currency TEXT NOT NULL,
	status TEXT NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'authorized', 'paid', 'partially_refunded', 'refunded',
			'disputed', 'cancelled', 'expired')),
	-- refunds counted (failed ones given back); lost disputes are not refunds
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
	updated_at INTEGER NOT NULL,
	-- held by open disputes, and lost to decided ones (counted like refunds)
	disputed_amount INTEGER NOT NULL DEFAULT 0 CHECK (disputed_amount >= 0),
	chargeback_amount INTEGER NOT NULL DEFAULT 0 CHECK (chargeback_amount >= 0),
	authorized_at INTEGER,
	closed_at INTEGER, -- cancelled or expired before any payment
	-- the provider's times of the newest capture and capture failure (ms):
	-- a capture failed while capture_failed_at >= captured_at
	captured_at INTEGER NOT NULL DEFAULT 0,
	capture_failed_at INTEGER,
	-- bumped by every change: each write is a compare-and-set on it
	revision INTEGER NOT NULL DEFAULT 0
);
INSERT INTO orders (id, amount, currency, status, refunded_amount, customer_ref, provider,
		payment_ref, fulfillment_status, needs_operator, created_at, paid_at, refunded_at,
		updated_at)
	SELECT id, amount, currency, status, refunded_amount, customer_ref, provider, payment_ref,
		fulfillment_status, needs_operator, created_at, paid_at, refunded_at, updated_at
	FROM orders_before_0005;
DROP TABLE orders_before_0005;
CREATE INDEX orders_status ON orders (status);

-- Points given back after a refund failed or a dispute was won join award and
-- clawback. The ledger is referenced by nothing, so a plain copy does.
CREATE TABLE points_ledger_before_0005 AS SELECT * FROM points_ledger;
DROP TABLE points_ledger;
CREATE TABLE points_ledger (
	id INTEGER PRIMARY KEY,
	order_id TEXT NOT NULL REFERENCES orders (id),
	reason TEXT NOT NULL CHECK (reason IN ('award', 'clawback', 'restore')),
	ref TEXT NOT NULL,
	points INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	UNIQUE (order_id, reason, ref)
);
INSERT INTO points_ledger (id, order_id, reason, ref, points, created_at)
	SELECT id, order_id, reason, ref, points, created_at FROM points_ledger_before_0005;
DROP TABLE points_ledger_before_0005;

-- A refund row that failed stays (so a late copy of the refund counts nothing)
-- and gives its amount back. cumulative: counted from a running total;
-- reversed: a failure whose refund was never named, given back from those.
ALTER TABLE refunds ADD COLUMN status TEXT NOT NULL DEFAULT 'applied'
	CHECK (status IN ('applied', 'failed'));
ALTER TABLE refunds ADD COLUMN cumulative INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN reversed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN failed_at INTEGER;

-- Every reference an order has been seen under, per provider instance: a
-- refund or dispute that names only the payment finds its order here.
CREATE TABLE order_refs (
	provider TEXT NOT NULL,
	ref TEXT NOT NULL,
	order_id TEXT NOT NULL REFERENCES orders (id),
	kind TEXT NOT NULL CHECK (kind IN ('payment', 'charge')),
	created_at INTEGER NOT NULL,
	PRIMARY KEY (provider, ref)
);
CREATE INDEX order_refs_order ON order_refs (order_id);
INSERT INTO order_refs (provider, ref, order_id, kind, created_at)
	SELECT provider, payment_ref, id, 'payment', COALESCE(paid_at, updated_at) FROM orders
	WHERE provider IS NOT NULL AND payment_ref IS NOT NULL
	ON CONFLICT (provider, ref) DO NOTHING;

-- One row per dispute; its status follows the decisions recorded in
-- dispute_steps, each provider event once.
CREATE TABLE disputes (
	id INTEGER PRIMARY KEY,
	order_id TEXT NOT NULL REFERENCES orders (id),
	provider TEXT NOT NULL,
	dispute_ref TEXT NOT NULL,
	amount INTEGER NOT NULL CHECK (amount >= 0),
	status TEXT NOT NULL CHECK (status IN ('open', 'won', 'lost')),
	won_steps INTEGER NOT NULL DEFAULT 0,
	lost_steps INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (order_id, provider, dispute_ref)
);
CREATE TABLE dispute_steps (
	provider TEXT NOT NULL,
	dispute_ref TEXT NOT NULL,
	step_key TEXT NOT NULL,
	outcome TEXT NOT NULL CHECK (outcome IN ('opened', 'won', 'lost')),
	created_at INTEGER NOT NULL,
	PRIMARY KEY (provider, dispute_ref, step_key)
);

-- A refund, dispute or reversal that names a payment no order has been seen
-- under yet waits here, normalized, and is applied when its payment arrives.
CREATE TABLE order_parked (
	id INTEGER PRIMARY KEY,
	provider TEXT NOT NULL,
	ref TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	type TEXT,
	kind TEXT NOT NULL,
	order_ref TEXT,
	payment_ref TEXT,
	charge_ref TEXT,
	refund_ref TEXT,
	amount INTEGER,
	currency TEXT,
	refund_cumulative INTEGER NOT NULL DEFAULT 0,
	occurred_at INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	applied_at INTEGER,
	UNIQUE (provider, idem_key)
);
CREATE INDEX order_parked_ref ON order_parked (provider, ref) WHERE applied_at IS NULL;
