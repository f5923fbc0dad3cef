-- Fewer database pages written per callback (issue 24, docs/benchmarks.md):
-- every b-tree a callback writes is at least one page in the WAL and again
-- in the checkpoint, and a b-tree keyed by a random value is one page per
-- callback once the table is larger than what one commit's callbacks share.
--
-- order_refs is looked up only by its key (provider, ref): stored WITHOUT
-- ROWID, the key is the table, one b-tree instead of the rowid table and its
-- primary-key index. order_refs_order indexed the rows by order_id, which no
-- query reads (orders are never deleted, so no foreign-key check needs it),
-- yet it was one more page at a random place per payment. order_refs is
-- referenced by nothing, so a plain copy does.
CREATE TABLE order_refs_before_0010 AS SELECT * FROM order_refs;
DROP TABLE order_refs;
CREATE TABLE order_refs (
	provider TEXT NOT NULL,
	ref TEXT NOT NULL,
	order_id TEXT NOT NULL REFERENCES orders (id),
	kind TEXT NOT NULL CHECK (kind IN ('payment', 'charge')),
	created_at INTEGER NOT NULL,
	PRIMARY KEY (provider, ref)
) WITHOUT ROWID;
INSERT INTO order_refs (provider, ref, order_id, kind, created_at)
	SELECT provider, ref, order_id, kind, created_at FROM order_refs_before_0010;
DROP TABLE order_refs_before_0010;
