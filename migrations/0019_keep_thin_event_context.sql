-- A Stripe thin event from a connected account (or an account of an
-- organization) names that account in its `context` ("acct_..." or
-- "acct_.../acct_..."), and Stripe serves its full event only to a request
-- made in that context (header Stripe-Context). The context was dropped
-- when the thin event was recorded, so its fetch asked without it, Stripe
-- answered "not found", and the event waited, alerted on, until an
-- operator dismissed it. The waiting event keeps its context in a column
-- of its own, read with it by the fetch worker's list (ingest.c,
-- ingest_fetch_pending) through the view `events`.
ALTER TABLE idempotency_records ADD COLUMN context TEXT;

-- The thin events already waiting take theirs from the notification they
-- recorded as their payload, when it is an account id (letters, digits,
-- "_", segments joined by "/", at most 255 bytes, as the profile checks
-- it now): one that is not stays without, and is fetched as before. Only
-- the waiting rows are read, through their own index (events_to_fetch).
-- CASE: json_extract errors on a payload that is not JSON, so it runs only
-- on one json_valid passed.
UPDATE idempotency_records
	SET context = CASE
		WHEN NOT json_valid(CAST(payload AS TEXT)) THEN NULL
		WHEN json_type(CAST(payload AS TEXT), '$.context') IS NOT 'text' THEN NULL
		WHEN length(json_extract(CAST(payload AS TEXT), '$.context')) NOT BETWEEN 1 AND 255
			THEN NULL
		WHEN json_extract(CAST(payload AS TEXT), '$.context') GLOB '*[^A-Za-z0-9_/]*'
			OR json_extract(CAST(payload AS TEXT), '$.context') GLOB '/*'
			OR json_extract(CAST(payload AS TEXT), '$.context') GLOB '*/'
			OR json_extract(CAST(payload AS TEXT), '$.context') GLOB '*//*' THEN NULL
		ELSE json_extract(CAST(payload AS TEXT), '$.context')
	END
	WHERE outcome = 'done' AND effect = 'to_fetch' AND dismissed_at IS NULL
		AND payload IS NOT NULL;

-- The view of the event rows shows it too (0012's columns, then context).
DROP VIEW events;
CREATE VIEW events AS
	SELECT id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,
		refund_cumulative, payload, outcome, effect, reason, received_at, processed_at,
		reprocessed, source, test_mode, dismissed_at, dismissed_by, dismiss_reason, context
	FROM idempotency_records WHERE kind IS NOT NULL;
