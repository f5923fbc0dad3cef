-- pgbench script: the eight statements one new Stripe payment runs on
-- PostgreSQL's writer, with the handlers' statements as of issue 25's sixth
-- round: the claim, the order's load (with its disputes' sums), the
-- reference's bind and the parked events' lookup it leads to, the points'
-- sums, the order's compare-and-set, the award, and the claim's held update
-- of its record (the two other guarded writes as plain statements), every
-- value a parameter as the receiver sends them. For comparing the server's
-- time per statement across schemas (docs/benchmarks.md, "Server CPU per
-- callback") and, through contrib/bench/pg_forms.sh, the forms of sending
-- them (docs/benchmarks.md, "Where the floor is (issue 25, seventh round)"). The
-- database needs the schema (idemhook migrate) and orders ord_1..ord_100000:
--   INSERT INTO orders (id, amount, currency, status, created_at, updated_at)
--     SELECT 'ord_' || g, 1000, 'USD', 'pending', 1, 1 FROM generate_series(1, 100000) g;
-- Run with pg_stat_statements loaded, then read mean_exec_time per statement:
--   PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -T 4 -f contrib/bench/pg_callback.sql \
--     -D scope=stripe -D processing=processing -D 'fp=\x7b7d' -D award=award -D clawback=clawback -D restore=restore \
--     -D paid=paid -D zero=0 -D payment=payment -D done=done -D ct=application/json \
--     -D type=payment_intent.succeeded -D kind=payment_succeeded -D usd=USD DBNAME
\set k random(1, 100000)
\set r random(1, 9000000000000000000)
BEGIN;
INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, lease_until, fence_token, created_at, updated_at) VALUES (:scope, :r, :processing, :fp, 5, 1, 1, 1) ON CONFLICT (scope, idem_key) DO NOTHING;
SELECT o.id, o.amount, o.currency, o.status, o.refunded_amount, o.provider, o.payment_ref, o.paid_at, o.refunded_at, o.authorized_at, o.closed_at, o.captured_at, o.capture_failed_at, o.revision, COALESCE(SUM(CASE WHEN d.status = 'open' THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN d.status = 'open' THEN d.amount ELSE 0 END), 0), COALESCE(SUM(CASE WHEN d.status = 'lost' THEN d.amount ELSE 0 END), 0), COUNT(d.id) FROM orders o LEFT JOIN disputes d ON d.order_id = o.id WHERE o.id = 'ord_' || :k GROUP BY o.id;
SELECT COALESCE(SUM(CASE WHEN reason = :award THEN points ELSE 0 END), 0), COALESCE(SUM(CASE WHEN reason = :clawback THEN points ELSE 0 END), 0), COALESCE(SUM(CASE WHEN reason = :restore THEN points ELSE 0 END), 0) FROM points_ledger WHERE order_id = 'ord_' || :k;
UPDATE orders SET status = :paid, refunded_amount = :zero, disputed_amount = :zero, chargeback_amount = :zero, provider = :scope, payment_ref = :r, paid_at = 2, refunded_at = NULL, authorized_at = NULL, closed_at = NULL, captured_at = 2, capture_failed_at = NULL, updated_at = 2, revision = revision + 1 WHERE id = 'ord_' || :k AND revision >= :zero;
INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES (:scope, :r, 'ord_' || :k, :payment, 2) ON CONFLICT (provider, ref) DO NOTHING;
SELECT id, idem_key, type, kind, order_ref, payment_ref, charge_ref, refund_ref, amount, currency, refund_cumulative, occurred_at FROM order_parked WHERE provider = :scope AND ref = :r::text AND applied_at IS NULL ORDER BY id LIMIT 1;
INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES ('ord_' || :k, :award, :r, 10, 2) ON CONFLICT (order_id, reason, ref) DO NOTHING;
WITH one AS (UPDATE idempotency_records SET status = :done, reply_status = 200, reply_content_type = :ct, reply_headers = NULL, reply_body = :fp, lease_until = NULL, updated_at = 2, type = :type, kind = :kind, order_ref = 'ord_' || :k, payment_ref = :r, amount = 1000, currency = :usd, outcome = :done, effect = :paid, received_at = 1, processed_at = 2 WHERE scope = :scope AND idem_key = :r::text AND fence_token = 1 AND status = 'processing' RETURNING '1') SELECT CAST(COALESCE((SELECT * FROM one), 'the record changed under its unit') AS integer);
COMMIT;
