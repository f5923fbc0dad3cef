-- PostgreSQL: the order API client that created an order, as 0007 for SQLite.
ALTER TABLE orders ADD COLUMN owner TEXT;
CREATE INDEX orders_owner_created ON orders (owner, created_at);
