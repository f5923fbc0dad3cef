-- Indexes only where a query needs them: every one is written on each
-- callback inside the writer's transaction.
--
-- orders_status (made again by 0005): no query looks orders up by status
-- (they go by id), yet every payment moved the order's entry to 'paid'.
DROP INDEX IF EXISTS orders_status;

-- events_outcome indexed every event by (outcome, received_at); what reads
-- it counts failed events (stats, metrics). A partial index holds only
-- those, and is not written at all for an event that did not fail.
DROP INDEX IF EXISTS events_outcome;
CREATE INDEX events_failed ON events (received_at) WHERE outcome = 'failed';
