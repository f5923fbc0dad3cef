-- One-time messages of the checkout page ("Order created."), written in the
-- transaction that creates the order and taken (deleted) by the first view
-- of its page, on whichever receiver that request reaches. Kept in the
-- database rather than in one process's memory for that reason.
CREATE TABLE checkout_flash (
	token TEXT PRIMARY KEY,
	order_id TEXT NOT NULL,
	message TEXT NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX checkout_flash_expires ON checkout_flash (expires_at);
