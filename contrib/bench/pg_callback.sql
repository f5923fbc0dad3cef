-- pgbench script: the seven statements one new Stripe payment runs on
-- PostgreSQL's writer (claim, the order's reads and compare-and-set, its reference
-- and points, the held update of the record), as the receiver sends them
-- (every value a parameter), for comparing the server's time per statement
-- across schemas (docs/benchmarks.md, "Server CPU per callback"). The
-- database needs the schema (idemhook migrate) and orders ord_1..ord_100000:
--   INSERT INTO orders (id, amount, currency, status, created_at, updated_at)
--     SELECT 'ord_' || g, 1000, 'USD', 'pending', 1, 1 FROM generate_series(1, 100000) g;
-- Run with pg_stat_statements loaded, then read mean_exec_time per statement:
--   PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -T 4 -f contrib/bench/pg_callback.sql \
--     -D scope=stripe -D processing=processing -D 'fp=\x7b7d' -D award=award -D clawback=clawback \
--     -D paid=paid -D zero=0 -D payment=payment -D done=done -D ct=application/json \
--     -D type=payment_intent.succeeded -D kind=payment_succeeded -D usd=USD DBNAME
\set k random(1, 100000)
\set r random(1, 2000000000)
BEGIN;
INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, lease_until, fence_token, created_at, updated_at) VALUES (:scope, :r, :processing, :fp, 5, 1, 1, 1) ON CONFLICT (scope, idem_key) DO NOTHING;
SELECT id, amount, currency, status, refunded_amount, provider, payment_ref, paid_at, revision FROM orders WHERE id = 'ord_' || :k;
SELECT COALESCE(SUM(CASE WHEN reason = :award THEN points ELSE 0 END), 0), COALESCE(SUM(CASE WHEN reason = :clawback THEN points ELSE 0 END), 0) FROM points_ledger WHERE order_id = 'ord_' || :k AND reason IN ('award', 'clawback', 'restore');
UPDATE orders SET status = :paid, refunded_amount = :zero, disputed_amount = :zero, chargeback_amount = :zero, provider = :scope, payment_ref = :r, paid_at = 2, refunded_at = NULL, authorized_at = NULL, closed_at = NULL, captured_at = 2, capture_failed_at = NULL, updated_at = 2, revision = revision + 1 WHERE id = 'ord_' || :k;
INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES (:scope, :r, 'ord_' || :k, :payment, 2) ON CONFLICT (provider, ref) DO NOTHING;
INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES ('ord_' || :k, :award, :r, 10, 2) ON CONFLICT (order_id, reason, ref) DO NOTHING;
WITH one AS (UPDATE idempotency_records SET status = :done, reply_status = 200, reply_content_type = :ct, reply_headers = NULL, reply_body = :fp, lease_until = NULL, updated_at = 2, type = :type, kind = :kind, order_ref = 'ord_' || :k, payment_ref = :r, amount = 1000, currency = :usd, outcome = :done, effect = :paid, received_at = 1, processed_at = 2 WHERE scope = :scope AND idem_key = :r::text AND fence_token = 1 AND status = 'processing' RETURNING 1) SELECT CAST(CASE count(*) WHEN 1 THEN '1' ELSE 'changed' END AS integer) FROM one;
COMMIT;
