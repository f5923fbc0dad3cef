-- PostgreSQL: one-time messages of the checkout page, as 0009 for SQLite.
CREATE TABLE checkout_flash (
	token TEXT PRIMARY KEY,
	order_id TEXT NOT NULL,
	message TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE INDEX checkout_flash_expires ON checkout_flash (expires_at);
