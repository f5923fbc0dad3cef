-- Fewer pages written per callback (issue 24; migrations/0010 for SQLite,
-- which also stores order_refs WITHOUT ROWID: PostgreSQL keeps its heap and
-- primary-key index, the equivalent there). order_refs_order indexed the
-- rows by order_id, which no query reads (orders are never deleted, so no
-- foreign-key check needs it), yet it was one more page at a random place
-- per payment.
DROP INDEX IF EXISTS order_refs_order;
