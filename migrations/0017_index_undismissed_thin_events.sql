-- A thin event an operator dismissed (`idemhook events dismiss`: Stripe no
-- longer has its full event, it keeps events 30 days) waits no longer: the
-- fetch worker leaves it alone, and gc expires it with its retention
-- instead of keeping it as it keeps a thin event still waiting. It keeps
-- outcome 'done' and effect 'to_fetch' (it was acknowledged and never
-- applied: that stays true), so the index of migration 0016 would keep
-- holding it, and the fetch worker's list (ingest.c, ingest_fetch_pending,
-- which now asks for dismissed_at IS NULL) would read every dismissed row
-- at each pass from the beginning until gc took it. The index holds the
-- rows still waiting and nothing else, as 0016 meant it to. Rebuilding it
-- reads the table once, as 0016 did.
DROP INDEX events_to_fetch;
CREATE INDEX events_to_fetch ON idempotency_records (received_at)
	WHERE outcome = 'done' AND effect = 'to_fetch' AND dismissed_at IS NULL;
