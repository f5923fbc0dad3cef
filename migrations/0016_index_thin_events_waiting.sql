-- The thin events waiting for their full event, in their own index (issue
-- 24, docs/benchmarks.md "Ten million stored callbacks"). The fetch worker
-- lists them (ingest.c, ingest_fetch_pending: outcome 'done', effect
-- 'to_fetch', by received_at from its mark) at start, once an hour from the
-- beginning, and after each thin notification. Through events_received_at
-- that list read every event row after the mark to find the few waiting:
-- from the beginning, every event stored, 62 s on a database of 10,000,000
-- callbacks. The list is one read transaction, and while it is open no
-- checkpoint can copy the WAL past the snapshot it reads: the WAL grew to
-- 270,000 frames, every read looked through it, and the daemon took a fifth
-- of its rate. This index holds only the waiting rows (a thin event's row
-- enters it when its notification is recorded and leaves it when its full
-- event is applied), so the list reads those and nothing else. Building it
-- reads the table once: 21 s for 10,000,000 callbacks with the file in the
-- page cache, as long as reading the whole file takes from a cold disk.
CREATE INDEX events_to_fetch ON idempotency_records (received_at)
	WHERE outcome = 'done' AND effect = 'to_fetch';
