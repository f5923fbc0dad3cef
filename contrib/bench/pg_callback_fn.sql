-- The eight statements of contrib/bench/pg_callback.sql (one new Stripe
-- payment on PostgreSQL's writer) as one PL/pgSQL function: the form a
-- "server-side function per callback" would take, for measuring what it
-- would save the server against the statements sent one by one, in lanes
-- (as the receiver sends them) or all in one pipeline. Created and called by
-- contrib/bench/pg_forms.sh on a throwaway server only; no migration
-- installs it (docs/benchmarks.md, "Where the floor is (issue 25, seventh round)").
-- PL/pgSQL prepares each statement once per session and keeps its plan, as
-- `pgbench -M prepared` does for the statements sent by the client.
CREATE OR REPLACE FUNCTION bench_callback(p_scope text, p_key text, p_order text, p_fp bytea)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	n integer;
	ord record;
	s_award bigint;
	s_claw bigint;
	s_restore bigint;
	parked record;
BEGIN
	INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, lease_until,
			fence_token, created_at, updated_at)
		VALUES (p_scope, p_key, 'processing', p_fp, 5, 1, 1, 1)
		ON CONFLICT (scope, idem_key) DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n = 0 THEN
		RETURN 0;
	END IF;
	SELECT o.id, o.amount, o.currency, o.status, o.refunded_amount, o.provider, o.payment_ref,
			o.paid_at, o.refunded_at, o.authorized_at, o.closed_at, o.captured_at,
			o.capture_failed_at, o.revision,
			COALESCE(SUM(CASE WHEN d.status = 'open' THEN 1 ELSE 0 END), 0) AS open_n,
			COALESCE(SUM(CASE WHEN d.status = 'open' THEN d.amount ELSE 0 END), 0) AS open_sum,
			COALESCE(SUM(CASE WHEN d.status = 'lost' THEN d.amount ELSE 0 END), 0) AS lost_sum,
			COUNT(d.id) AS disputes INTO ord
		FROM orders o LEFT JOIN disputes d ON d.order_id = o.id WHERE o.id = p_order GROUP BY o.id;
	SELECT COALESCE(SUM(CASE WHEN reason = 'award' THEN points ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN reason = 'clawback' THEN points ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN reason = 'restore' THEN points ELSE 0 END), 0)
			INTO s_award, s_claw, s_restore
		FROM points_ledger WHERE order_id = p_order;
	UPDATE orders SET status = 'paid', refunded_amount = 0, disputed_amount = 0,
			chargeback_amount = 0, provider = p_scope, payment_ref = p_key, paid_at = 2,
			refunded_at = NULL, authorized_at = NULL, closed_at = NULL, captured_at = 2,
			capture_failed_at = NULL, updated_at = 2, revision = revision + 1
		WHERE id = p_order AND revision = ord.revision;
	INSERT INTO order_refs (provider, ref, order_id, kind, created_at)
		VALUES (p_scope, p_key, p_order, 'payment', 2)
		ON CONFLICT (provider, ref) DO NOTHING;
	SELECT id, idem_key, type, kind, order_ref, payment_ref, charge_ref, refund_ref, amount,
			currency, refund_cumulative, occurred_at INTO parked
		FROM order_parked
		WHERE provider = p_scope AND ref = p_key AND applied_at IS NULL ORDER BY id LIMIT 1;
	INSERT INTO points_ledger (order_id, reason, ref, points, created_at)
		VALUES (p_order, 'award', p_key, 10, 2)
		ON CONFLICT (order_id, reason, ref) DO NOTHING;
	UPDATE idempotency_records SET status = 'done', reply_status = 200,
			reply_content_type = 'application/json', reply_headers = NULL,
			reply_body = p_fp, lease_until = NULL, updated_at = 2,
			type = 'payment_intent.succeeded', kind = 'payment_succeeded',
			order_ref = p_order, payment_ref = p_key, amount = 1000, currency = 'USD',
			outcome = 'done', effect = 'paid', received_at = 1, processed_at = 2
		WHERE scope = p_scope AND idem_key = p_key AND fence_token = 1
			AND status = 'processing';
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n <> 1 THEN
		RAISE EXCEPTION 'the record changed under its unit';
	END IF;
	RETURN 1;
END $$;
