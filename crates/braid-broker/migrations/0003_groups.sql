-- Co-reservation groups: one row per part, naming its group (the id of the
-- group's first part). Written in the same transaction as the parts.
-- Portable SQL (SQLite and PostgreSQL).
CREATE TABLE IF NOT EXISTS reservation_groups (
    reservation_id BIGINT PRIMARY KEY,
    group_id BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS reservation_groups_group ON reservation_groups (group_id);
-- Parts held by peer brokers: the local reservation (a group's first part)
-- and the peer's reservation id for each routed resource.
CREATE TABLE IF NOT EXISTS peer_parts (
    local_id BIGINT NOT NULL,
    peer TEXT NOT NULL,
    resource TEXT NOT NULL,
    remote_id BIGINT NOT NULL,
    PRIMARY KEY (local_id, peer, resource)
);
