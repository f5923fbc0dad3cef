-- Cheaper CHECK constraints (issue 24; migrations/0014 for SQLite, whose IN
-- lists of three or more constants built a temporary b-tree every time a
-- statement checked them). PostgreSQL compares an IN list in place, so
-- nothing changes here; the version is kept so that both backends number
-- their migrations alike.
SELECT 1;
