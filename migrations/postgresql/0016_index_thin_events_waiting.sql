-- The thin events waiting for their full event, in their own index: the
-- same as migrations/0016 (issue 24). The fetch worker's list of them
-- (outcome 'done', effect 'to_fetch', by received_at from its mark) walked
-- events_received_at and read every event row after the mark, every event
-- stored when the mark is the beginning (at start and once an hour); the
-- partial index holds only the waiting rows.
CREATE INDEX events_to_fetch ON idempotency_records (received_at)
	WHERE outcome = 'done' AND effect = 'to_fetch';
