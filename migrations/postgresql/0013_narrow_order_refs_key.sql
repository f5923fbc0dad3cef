-- Narrower order_refs key (issue 24; migrations/0013 for SQLite, which turns
-- order_refs from a WITHOUT ROWID table back into a rowid table with a unique
-- index on (provider, ref)). PostgreSQL already stores it that way (a heap
-- and its primary-key index), so nothing changes here; the version is kept
-- so that both backends number their migrations alike.
SELECT 1;
