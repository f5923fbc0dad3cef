-- The thin events still waiting for their full event, without those an
-- operator dismissed: the same as migrations/0017. A dismissed thin event
-- keeps outcome 'done' and effect 'to_fetch' (acknowledged, never applied),
-- but the fetch worker no longer asks about it (dismissed_at IS NULL in its
-- list), so the partial index of 0016 leaves it out too.
DROP INDEX events_to_fetch;
CREATE INDEX events_to_fetch ON idempotency_records (received_at)
	WHERE outcome = 'done' AND effect = 'to_fetch' AND dismissed_at IS NULL;
