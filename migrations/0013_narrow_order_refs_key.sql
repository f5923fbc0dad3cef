-- Fewer pages written per callback (issue 24, docs/benchmarks.md, "Narrower
-- keys and a longer checkpoint interval"): order_refs goes back to a rowid
-- table whose key (provider, ref) is a unique index. Stored WITHOUT ROWID
-- (migration 0010) each leaf entry was the whole row, ~78 bytes, so a 1 KiB
-- leaf held ~10 entries and a payment's random reference split one every
-- few inserts (each split rewrites up to three sibling leaves and their
-- parent). The index entry is the key and a rowid, ~45 bytes, and the rows
-- are appended in time order, pages the callbacks of a commit share:
-- 0.6 to 0.95 KB fewer bytes handed to pwrite per unique callback.
-- order_refs is referenced by nothing, so a plain copy does.
CREATE TABLE order_refs_before_0013 AS SELECT * FROM order_refs;
DROP TABLE order_refs;
CREATE TABLE order_refs (
	provider TEXT NOT NULL,
	ref TEXT NOT NULL,
	order_id TEXT NOT NULL REFERENCES orders (id),
	kind TEXT NOT NULL CHECK (kind IN ('payment', 'charge')),
	created_at INTEGER NOT NULL
);
INSERT INTO order_refs (provider, ref, order_id, kind, created_at)
	SELECT provider, ref, order_id, kind, created_at FROM order_refs_before_0013
	ORDER BY created_at, provider, ref;
DROP TABLE order_refs_before_0013;
CREATE UNIQUE INDEX order_refs_ref ON order_refs (provider, ref);
