-- pgbench script: the two forms of a claim's held update (the statement that
-- fails unless it changed one row) side by side in one transaction, each on
-- a record the transaction has just inserted, then a plain UPDATE of a row
-- for scale; compare their mean_exec_time in pg_stat_statements
-- (docs/benchmarks.md, "Server CPU per callback"). On a database with the
-- schema (idemhook migrate) and pg_stat_statements loaded:
--   PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -T 4 -f contrib/bench/pg_held_update.sql \
--     -D scope=stripe -D processing=processing -D 'fp=\x7b7d' -D done=done DBNAME
\set r random(1, 2000000000)
BEGIN;
INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, lease_until, fence_token, created_at, updated_at) VALUES (:scope, 'a' || :r, :processing, :fp, 5, 1, 1, 1) ON CONFLICT (scope, idem_key) DO NOTHING;
INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, lease_until, fence_token, created_at, updated_at) VALUES (:scope, 'b' || :r, :processing, :fp, 5, 1, 1, 1) ON CONFLICT (scope, idem_key) DO NOTHING;
-- the count(*) form (before 47b4234)
WITH one AS (UPDATE idempotency_records SET status = :done, reply_status = 200, reply_body = :fp, lease_until = NULL, updated_at = 2 WHERE scope = :scope AND idem_key = 'a' || :r AND fence_token = 1 AND status = 'processing' RETURNING 1) SELECT CAST(CASE count(*) WHEN 1 THEN '1' ELSE 'the record changed under its unit' END AS integer) FROM one;
-- the scalar subquery form
WITH one AS (UPDATE idempotency_records SET status = :done, reply_status = 200, reply_body = :fp, lease_until = NULL, updated_at = 2 WHERE scope = :scope AND idem_key = 'b' || :r AND fence_token = 1 AND status = 'processing' RETURNING '1') SELECT CAST(COALESCE((SELECT * FROM one), 'the record changed under its unit') AS integer);
UPDATE idempotency_records SET status = :done, reply_status = 200, reply_body = :fp, lease_until = NULL, updated_at = 3 WHERE scope = :scope AND idem_key = 'b' || :r AND fence_token = 1 AND status = 'done';
COMMIT;
