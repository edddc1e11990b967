-- What a reservation is enforced on (`braid broker --enforce`): the network
-- flow as JSON (addresses, protocol, ports) and the process id for a CPU
-- reservation. Set when the reservation is made, never changed.
ALTER TABLE reservations ADD COLUMN flow TEXT;
ALTER TABLE reservations ADD COLUMN pid BIGINT;
