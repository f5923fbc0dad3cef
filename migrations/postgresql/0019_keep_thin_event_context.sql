-- A Stripe thin event's context (the connected account it happened in),
-- kept with the waiting event so that its fetch names it in
-- Stripe-Context: the same as migrations/0019. The waiting rows take
-- theirs from the notification recorded as their payload (JSON the
-- profile parsed strictly, so its cast cannot fail), when it is an account
-- id.
ALTER TABLE idempotency_records ADD COLUMN context TEXT;

-- The payload is read as JSON in a CTE of its own, so only the waiting
-- rows' (JSON) are cast: beside other conditions in one WHERE the cast
-- could be evaluated first, on another provider's payload (Alipay's is a form).
WITH waiting AS MATERIALIZED (
	SELECT id, convert_from(payload, 'UTF8')::jsonb -> 'context' AS context
	FROM idempotency_records
	WHERE outcome = 'done' AND effect = 'to_fetch' AND dismissed_at IS NULL
		AND payload IS NOT NULL
)
UPDATE idempotency_records AS r SET context = w.context #>> '{}'
	FROM waiting AS w
	WHERE r.id = w.id AND jsonb_typeof(w.context) = 'string'
		AND length(w.context #>> '{}') <= 255
		AND (w.context #>> '{}') ~ '^[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*$';

-- The view of the event rows shows it too: appended, as CREATE OR REPLACE
-- VIEW allows.
CREATE OR REPLACE VIEW events AS
	SELECT id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,
		refund_cumulative, payload, outcome, effect, reason, received_at, processed_at,
		reprocessed, source, test_mode, dismissed_at, dismissed_by, dismiss_reason, context
	FROM idempotency_records WHERE kind IS NOT NULL;
