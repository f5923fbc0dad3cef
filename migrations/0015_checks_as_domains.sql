-- PostgreSQL turns the CHECK constraints of the tables every callback writes
-- into domains in its 0015 (the executor there re-reads CHECK expressions
-- from text on every statement). SQLite checks them from the compiled
-- statement and has no domains: nothing changes here; the version is kept
-- so that both backends number their migrations alike.
SELECT 1;
