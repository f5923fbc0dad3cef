-- The order API client that created an order (the bearer token's name, or
-- the X-Client-Id without tokens); NULL for orders made elsewhere (the
-- checkout page, the CLI). GET /api/orders[/{id}] shows a client its own.
ALTER TABLE orders ADD COLUMN owner TEXT;
CREATE INDEX orders_owner_created ON orders (owner, created_at);
