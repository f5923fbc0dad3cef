-- Nothing to do on SQLite: a rowid table gives a new row the largest id
-- plus one, so rows copied in by `idemhook store copy` never meet a new
-- one. See migrations/postgresql/0018 for the PostgreSQL side; the
-- version is kept in step on both backends.
SELECT 1;
