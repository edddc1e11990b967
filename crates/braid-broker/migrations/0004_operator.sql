-- What operators changed through the API (resources added or resized,
-- the policy): one row per key, the value JSON. Read at start, over the
-- configuration file. Portable SQL (SQLite and PostgreSQL).
CREATE TABLE IF NOT EXISTS operator_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
