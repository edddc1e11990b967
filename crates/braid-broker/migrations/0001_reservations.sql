-- Reservations, one row each: the book's record as JSON plus the columns
-- the broker selects on. Portable SQL (SQLite and PostgreSQL).
CREATE TABLE IF NOT EXISTS reservations (
    id BIGINT PRIMARY KEY,
    owner_user TEXT NOT NULL,
    owner_domain TEXT NOT NULL,
    resource TEXT NOT NULL,
    live BIGINT NOT NULL,
    callback TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reservations_live ON reservations (live);
CREATE INDEX IF NOT EXISTS reservations_owner ON reservations (owner_user);
