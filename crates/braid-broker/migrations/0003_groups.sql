-- Co-reservation groups: one row per part, naming its group (the id of the
-- group's first part). Written in the same transaction as the parts.
-- Portable SQL (SQLite and PostgreSQL).
CREATE TABLE IF NOT EXISTS reservation_groups (
    reservation_id BIGINT PRIMARY KEY,
    group_id BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS reservation_groups_group ON reservation_groups (group_id);
